package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 200) + ".b"
	cases := []struct {
		reason, name string
		same         bool
	}{
		{"a short name is its own label value", "notes", true},
		{"63 characters fit", strings.Repeat("x", 63), true},
		{"64 characters do not", strings.Repeat("x", 64), false},
		{"a 253-character claim name", strings.Repeat("n", 253), false},
		{"a long name with dots", long, false},
		{"a cut that would end in a dot", strings.Repeat("a", 51) + "." + strings.Repeat("b", 20), false},
	}
	seen := map[string]string{}
	for _, tc := range cases {
		got := LabelValue(tc.name)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("%s: %q is not a label value: %v", tc.reason, got, errs)
		}
		if (got == tc.name) != tc.same {
			t.Errorf("%s: LabelValue(%q) = %q", tc.reason, tc.name, got)
		}
		if other, ok := seen[got]; ok && other != tc.name {
			t.Errorf("%s: %q and %q share the label value %q", tc.reason, other, tc.name, got)
		}
		seen[got] = tc.name
	}
	if LabelValue(strings.Repeat("n", 253)) == LabelValue(strings.Repeat("n", 252)) {
		t.Error("names that differ after the cut share a label value")
	}
}
