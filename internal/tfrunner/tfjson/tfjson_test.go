package tfjson

import (
	"strings"
	"testing"

	hcjson "github.com/hashicorp/terraform-json"
)

func TestSummarize(t *testing.T) {
	rc := func(addr string, importing bool, actions ...hcjson.Action) *hcjson.ResourceChange {
		c := &hcjson.ResourceChange{Address: addr, Change: &hcjson.Change{Actions: actions}}
		if importing {
			c.Change.Importing = &hcjson.Importing{ID: "x"}
		}
		return c
	}
	p := Summarize(&hcjson.Plan{ResourceChanges: []*hcjson.ResourceChange{
		rc("module.main.a", false, hcjson.ActionCreate),
		rc("module.main.b", false, hcjson.ActionUpdate),
		rc("module.main.c", false, hcjson.ActionDelete, hcjson.ActionCreate),
		rc("module.main.d", false, hcjson.ActionDelete),
		rc("module.main.e", false, hcjson.ActionNoop),
		rc("module.main.f", true, hcjson.ActionNoop),
	}})
	if p.Summary != (Summary{Add: 2, Change: 1, Destroy: 2, Import: 1}) {
		t.Errorf("summary %+v", p.Summary)
	}
	if len(p.Changes) != 5 {
		t.Errorf("changes %+v, want the 5 that are not plain no-ops", p.Changes)
	}
	if !p.Changes[2].Destroys() || p.Changes[0].Destroys() {
		t.Errorf("Destroys: replace=%v create=%v", p.Changes[2].Destroys(), p.Changes[0].Destroys())
	}
	again := Summarize(&hcjson.Plan{ResourceChanges: []*hcjson.ResourceChange{rc("module.main.a", false, hcjson.ActionCreate)}})
	other := Summarize(&hcjson.Plan{ResourceChanges: []*hcjson.ResourceChange{rc("module.main.b", false, hcjson.ActionCreate)}})
	if len(again.ID) != 12 || again.ID == other.ID {
		t.Errorf("plan IDs %q and %q", again.ID, other.ID)
	}
}

func TestNoRemoteObject(t *testing.T) {
	for addr, want := range map[string]bool{
		"module.main.random_pet.this":                  true,
		"module.main.module.inner.time_sleep.wait[0]":  true,
		`module.main.tls_private_key.k["a.b"]`:         true,
		"random_id.x":                                  true,
		"module.main.local_file.this":                  false,
		"module.main.terraform_data.slow":              true,
		"module.main.null_resource.x":                  true,
		"module.main.terraform_data_x.y":               false,
		"module.main.data.random_x.y":                  false,
		"module.main.aws_db_instance.this":             false,
		"module.main":                                  false,
		`module.m["x.random_id.y"].aws_s3_bucket.this`: false,
		`module.m["unclosed.random_id.y`:               false,
	} {
		if got := NoRemoteObject(addr); got != want {
			t.Errorf("NoRemoteObject(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A line of the stream longer than the scanner's 16 MiB is skipped and said, and the lines after
// it are still read: the stream is drained to its end, so Terraform never blocks on a full pipe
// (issue 33: the scanner stopped at such a line, silently, and the rest was never read).
func TestReadStreamSkipsAnOverlongLine(t *testing.T) {
	long := `{"@message":"` + strings.Repeat("x", 17<<20) + `"}`
	after := `{"@level":"error","@message":"Error: boom","type":"diagnostic","diagnostic":{"severity":"error","summary":"boom","detail":""}}`
	res, err := ReadStream(strings.NewReader(long + "\n" + after + "\n"))
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err = %v; want the over-long line said", err)
	}
	if len(res.Errors) != 1 || res.Errors[0] != "boom" {
		t.Fatalf("errors after the long line = %v; want [boom]", res.Errors)
	}
}
