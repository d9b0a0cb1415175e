package tfrunner

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
)

// RunError is a failed Terraform command: which operation failed and Terraform's own error text.
type RunError struct {
	// Op is the operation: init, plan, apply, destroy, import, output or show.
	Op string
	// Message is Terraform's error output, trimmed to the diagnostics (see TrimMessage).
	Message string
	// Err is the underlying error from terraform-exec.
	Err error
}

func (e *RunError) Error() string { return fmt.Sprintf("terraform %s: %s", e.Op, e.Message) }
func (e *RunError) Unwrap() error { return e.Err }

// LockError is a run refused because someone else holds the state lock. It carries the lock's
// details as Terraform printed them; find it with errors.As.
type LockError struct {
	// ID of the lock (for force-unlock).
	ID string
	// Who holds it (user@host as Terraform records it). Who, Operation and Created are empty when
	// Terraform named only the lock's ID (terraform 1.11's http backend, see httpHolder).
	Who string
	// Operation the holder runs (e.g. OperationTypeApply).
	Operation string
	// Created is when the lock was taken, as Terraform printed it.
	Created string
	// Op is the operation that was refused.
	Op string
}

func (e *LockError) Error() string {
	if e.Who == "" && e.Operation == "" && e.Created == "" {
		return fmt.Sprintf("terraform %s: state is locked (lock ID %s)", e.Op, e.ID)
	}
	return fmt.Sprintf("terraform %s: state is locked by %s (lock ID %s, %s since %s)", e.Op, e.Who, e.ID, e.Operation, e.Created)
}

var (
	// lockField reads the holder from Terraform's own words. OpenTofu and Terraform say who holds a
	// refused lock only as text, statemgr.LockInfo.String ("Lock Info:\n  ID: …\n  Who: …"), in
	// the human output and in the -json stream's diagnostic alike (its detail; the diagnostic has
	// no lock fields), and a run has nothing else to go by: on a runner pod it cannot read the
	// state server's locks. Where the structured lock is at hand, in the controller, status takes
	// it from the Lease that the state server or the kubernetes backend keeps (statebackend
	// InspectLock), not from this error.
	lockField = regexp.MustCompile(`(?m)^\s*(ID|Who|Operation|Created):\s*(.*?)\s*$`)
	// httpHolder is the holder's lock ID in the http backend's refusal ("HTTP remote state already
	// locked: ID=<id>", wrapped in human output). Under "Lock Info:" OpenTofu 1.12.6 then prints
	// the holder's lock, but terraform 1.11.4 its own refused request (both measured against a
	// server answering 423 with the holder's LockInfo, as statebackend.Server does).
	httpHolder = regexp.MustCompile(`HTTP remote state already locked:\s*ID=(\S+)`)
	ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// MaxMessageBytes bounds the Terraform error text carried in errors and conditions.
const MaxMessageBytes = 2048

// classify turns a terraform-exec error into a *LockError when the state is locked, else a *RunError.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if strings.Contains(text, "Error acquiring the state lock") || strings.Contains(text, "Lock Info:") {
		le := &LockError{Op: op}
		for _, m := range lockField.FindAllStringSubmatch(text, -1) {
			switch m[1] {
			case "ID":
				le.ID = m[2]
			case "Who":
				le.Who = m[2]
			case "Operation":
				le.Operation = m[2]
			case "Created":
				le.Created = m[2]
			}
		}
		if m := httpHolder.FindStringSubmatch(text); m != nil && m[1] != le.ID {
			// The Lock Info block is this run's own request: of the holder, only the ID is known.
			le.ID, le.Who, le.Operation, le.Created = m[1], "", "", ""
		}
		return le
	}
	return &RunError{Op: op, Message: TrimMessage(text), Err: err}
}

// TrimMessage keeps the diagnostics of Terraform's error output: from the first "Error:" on, colours
// and box-drawing removed, blank lines collapsed, at most MaxMessageBytes.
func TrimMessage(text string) string {
	text = ansiEscape.ReplaceAllString(text, "")
	if i := strings.Index(text, "Error:"); i >= 0 {
		text = text[i:]
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(strings.TrimLeft(l, "│╷╵ "))
		if l == "" && (len(lines) == 0 || lines[len(lines)-1] == "") {
			continue
		}
		lines = append(lines, l)
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if len(out) > MaxMessageBytes {
		out = out[:MaxMessageBytes] + "…"
	}
	return out
}

// IsLocked reports whether err is (or wraps) a *LockError.
func IsLocked(err error) bool {
	var le *LockError
	return errors.As(err, &le)
}

// ErrProcessLost marks a run whose process was lost without a word about how it ended: a
// runner pod that died mid-run, or a process killed on a runner (the exit status does not cross
// the run protocol). Killed reports it.
var ErrProcessLost = errors.New("the run's process was lost")

// ProviderCrashed reports whether err is a run whose provider plugin stopped answering while it
// applied a change: crashed, OOM-killed or killed mid-create, so that the create may have happened
// while the state does not say so. Terraform and OpenTofu report it the same way (internal/plugin
// and plugin6, grpcErr: a gRPC Unavailable from ApplyResourceChange becomes the diagnostic "Plugin
// did not respond … failed to respond to the plugin.(*GRPCProvider).ApplyResourceChange call").
func ProviderCrashed(err error) bool {
	var re *RunError
	if !errors.As(err, &re) {
		return false
	}
	return strings.Contains(re.Message, "Plugin did not respond") && strings.Contains(re.Message, "ApplyResourceChange")
}

// Killed reports whether err says the run's Terraform process did not end on its own: it was
// killed by a signal (SIGKILL after the grace period, the OOM killer, a person) or outlived the
// grace period after the interrupt (exec.ErrWaitDelay), or its provider did (ProviderCrashed). Such a run may not have saved its state,
// so creates it started are in doubt. A process that exited with a status, even after an
// interrupt, saved its state (or left errored.tfstate) before it exited.
func Killed(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, exec.ErrWaitDelay) || errors.Is(err, ErrProcessLost) || ProviderCrashed(err) {
		return true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	return false
}

// ErrStateNotKept wraps the error of a run whose errored state (the state Terraform could not
// save) could not be stored either: its state is in doubt, creates it started stay in doubt, and
// no other run of its key starts until it is stored.
var ErrStateNotKept = errors.New("the state the run could not save was not stored either")
