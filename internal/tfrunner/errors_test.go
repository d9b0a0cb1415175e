package tfrunner

import (
	"errors"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
)

const lockOutput = `exit status 1

Error: Error acquiring the state lock

Error message: the state is already locked by another terraform client
Lock Info:
  ID:        2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41
  Path:      
  Operation: OperationTypeApply
  Who:       ops@laptop
  Version:   1.12.6
  Created:   2026-11-20 10:00:00 +0000 UTC
  Info:      

Terraform acquires a state lock to protect the state from being written
by multiple users at the same time.`

func TestClassify(t *testing.T) {
	err := classify("plan", errors.New(lockOutput))
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("lock output classified as %T", err)
	}
	want := LockError{ID: "2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41", Who: "ops@laptop", Operation: "OperationTypeApply",
		Created: "2026-11-20 10:00:00 +0000 UTC", Op: "plan"}
	if *le != want {
		t.Errorf("lock error %+v, want %+v", *le, want)
	}
	if !IsLocked(err) {
		t.Error("IsLocked = false")
	}

	err = classify("apply", errors.New("exit status 1\n\n\x1b[31m╷\n│ Error: mkdir /x: not a directory\n│ \n│   with module.main.local_file.this,\n╵\n"))
	var re *RunError
	if !errors.As(err, &re) || re.Op != "apply" {
		t.Fatalf("run error classified as %T", err)
	}
	if !strings.HasPrefix(re.Message, "Error: mkdir /x: not a directory") || strings.ContainsAny(re.Message, "│╷╵\x1b") {
		t.Errorf("message not trimmed: %q", re.Message)
	}
}

func TestTrimMessageBounds(t *testing.T) {
	if got := TrimMessage("Error: " + strings.Repeat("x", 5000)); len(got) > MaxMessageBytes+len("…") {
		t.Errorf("message of %d bytes", len(got))
	}
}

func TestSummarize(t *testing.T) {
	rc := func(addr string, importing bool, actions ...tfjson.Action) *tfjson.ResourceChange {
		c := &tfjson.ResourceChange{Address: addr, Change: &tfjson.Change{Actions: actions}}
		if importing {
			c.Change.Importing = &tfjson.Importing{ID: "x"}
		}
		return c
	}
	p := summarize(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{
		rc("module.main.a", false, tfjson.ActionCreate),
		rc("module.main.b", false, tfjson.ActionUpdate),
		rc("module.main.c", false, tfjson.ActionDelete, tfjson.ActionCreate),
		rc("module.main.d", false, tfjson.ActionDelete),
		rc("module.main.e", false, tfjson.ActionNoop),
		rc("module.main.f", true, tfjson.ActionNoop),
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
	again := summarize(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{rc("module.main.a", false, tfjson.ActionCreate)}})
	other := summarize(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{rc("module.main.b", false, tfjson.ActionCreate)}})
	if len(again.ID) != 12 || again.ID == other.ID {
		t.Errorf("plan IDs %q and %q", again.ID, other.ID)
	}
}
