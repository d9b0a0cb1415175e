package resource

import (
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// A module's outputs cannot make a resource too large to write: an output above
// MaxStatusOutputBytes, or past MaxStatusOutputsBytes in all, stays out of status (it is in the
// connection Secret); the rest, and sensitive ones never, are kept.
func TestSetOutputsBoundsStatus(t *testing.T) {
	str := func(n int) []byte { return []byte(`"` + strings.Repeat("x", n-2) + `"`) }
	outs := map[string]tfjson.Output{
		"a_small":   {Value: []byte(`"bucket-1"`)},
		"b_huge":    {Value: str(1 << 20)}, // 1 MiB: alone it would make the status unwritable
		"c_secret":  {Value: []byte(`"hunter2"`), Sensitive: true},
		"d_part1":   {Value: str(MaxStatusOutputBytes)},
		"e_part2":   {Value: str(MaxStatusOutputBytes)},
		"f_endless": {Value: []byte(`"tail"`)},
	}
	for i := range 8 { // nine outputs of 16 KiB: the ninth is past 128 KiB in all
		outs["g_many"+string(rune('0'+i))] = tfjson.Output{Value: str(MaxStatusOutputBytes)}
	}
	res := &v1alpha1.InfraResource{}
	setOutputs(res, outs)
	total := 0
	for name, v := range res.Status.Outputs {
		if len(v.Raw) > MaxStatusOutputBytes {
			t.Errorf("output %s of %d bytes kept in status", name, len(v.Raw))
		}
		total += len(v.Raw)
	}
	if total > MaxStatusOutputsBytes {
		t.Errorf("status keeps %d bytes of outputs, want at most %d", total, MaxStatusOutputsBytes)
	}
	for _, want := range []string{"a_small", "d_part1", "e_part2", "f_endless"} {
		if _, ok := res.Status.Outputs[want]; !ok {
			t.Errorf("output %s not in status", want)
		}
	}
	if _, ok := res.Status.Outputs["c_secret"]; ok {
		t.Error("a sensitive output is in status")
	}
	omitted := setOutputs(&v1alpha1.InfraResource{}, outs)
	if strings.Join(omitted, ",") != "b_huge,g_many5,g_many6,g_many7" {
		t.Errorf("omitted %v, want b_huge and the three past 128 KiB in all", omitted)
	}
}
