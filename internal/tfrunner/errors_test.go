package tfrunner

import (
	"errors"
	"strings"
	"testing"
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

// lockDiagnostic is the diagnostic OpenTofu 1.12.6's `plan -json` wrote for a LOCK the http
// backend's server refused (423, with the holder's LockInfo as JSON body), as streamError hands it
// to classify ("Error: summary: detail", then terraform-exec's error). The holder is in the detail
// only, as the text of statemgr.LockInfo.String: the -json stream has no structured lock.
const lockDiagnostic = "Error: Error acquiring the state lock: Error message: HTTP remote state already locked: ID=2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41\n" +
	"Lock Info:\n  ID:        2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41\n  Path:      \n  Operation: OperationTypeApply\n  Who:       ops@laptop\n" +
	"  Version:   1.12.6\n  Created:   2026-11-20 10:00:00 +0000 UTC\n  Info:      conductor-tf run abc123\n\n\n" +
	"OpenTofu acquires a state lock to protect the state from being written\nby multiple users at the same time. Please resolve the issue above and try\n" +
	"again. For most commands, you can disable locking with the \"-lock=false\"\nflag, but this is not recommended.\n\n\nexit status 1"

// terraformLockDiagnostic is what terraform 1.11.4's `plan -json` wrote for the same refusal: its
// Lock Info block is its own request (its ID, root@vm, OperationTypePlan); the holder is named by
// ID only, in the error message.
const terraformLockDiagnostic = "Error: Error acquiring the state lock: Error message: HTTP remote state already locked: ID=2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41\n" +
	"Lock Info:\n  ID:        61056d63-71e0-0c61-c7ea-15fa64102156\n  Path:      \n  Operation: OperationTypePlan\n  Who:       root@vm\n" +
	"  Version:   1.11.4\n  Created:   2026-11-26 07:11:37.177913455 +0000 UTC\n  Info:      \n\n\n" +
	"Terraform acquires a state lock to protect the state from being written\nby multiple users at the same time.\n\n\nexit status 1"

// terraformLockOutput is terraform 1.11.4's human output for it, the message wrapped.
const terraformLockOutput = `exit status 1

Error: Error acquiring the state lock

Error message: HTTP remote state already locked:
ID=2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41
Lock Info:
  ID:        a2741e8b-1101-cb8a-aae5-f78704858b65
  Path:      
  Operation: OperationTypePlan
  Who:       root@vm
  Version:   1.11.4
  Created:   2026-11-26 07:11:49.418969157 +0000 UTC
  Info:      
`

func TestClassifyTerraformHTTPLock(t *testing.T) {
	for name, text := range map[string]string{"human output": terraformLockOutput, "-json diagnostic": terraformLockDiagnostic} {
		var le *LockError
		if err := classify("apply", errors.New(text)); !errors.As(err, &le) {
			t.Fatalf("%s: classified as %T", name, err)
		}
		if want := (LockError{ID: "2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41", Op: "apply"}); *le != want {
			t.Errorf("%s: lock error %+v, want the holder's ID and nothing of the run's own request", name, *le)
		}
		if got := le.Error(); got != "terraform apply: state is locked (lock ID 2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41)" {
			t.Errorf("%s: message %q", name, got)
		}
	}
}

func TestClassify(t *testing.T) {
	for name, text := range map[string]string{"human output": lockOutput, "-json diagnostic": lockDiagnostic} {
		err := classify("plan", errors.New(text))
		var le *LockError
		if !errors.As(err, &le) {
			t.Fatalf("%s: lock output classified as %T", name, err)
		}
		want := LockError{ID: "2f0b8bd5-7d3b-4a8b-a0c2-0c5c0e2b3c41", Who: "ops@laptop", Operation: "OperationTypeApply",
			Created: "2026-11-20 10:00:00 +0000 UTC", Op: "plan"}
		if *le != want {
			t.Errorf("%s: lock error %+v, want %+v", name, *le, want)
		}
		if !IsLocked(err) {
			t.Errorf("%s: IsLocked = false", name)
		}
	}

	err := classify("apply", errors.New("exit status 1\n\n\x1b[31m╷\n│ Error: mkdir /x: not a directory\n│ \n│   with module.main.local_file.this,\n╵\n"))
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
