package state

import (
	"context"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// stateBackend is where a resource's runs keep their state, chosen once (New): the controller's
// state server (serverBackend: Terraform's http backend, credentials per run, states it could not
// write kept pending) or Terraform's kubernetes backend on the same Secrets (kubernetesBackend:
// runs write their state themselves, synchronously with the reconcile). The state phases ask it
// what they used to ask a possibly nil *statebackend.Server.
type stateBackend interface {
	// store is the Secrets and Leases states live in.
	store() *statebackend.Store
	// configure points spec at the state of suffix (labels on its Secret) for run runID and
	// returns the func that revokes what it issued, to call when the run ends.
	configure(spec *tfrunner.Spec, runID, suffix string, labels map[string]string) (revoke func())
	// retryPending writes a state a run produced and the backend could not store (saved: one was
	// written now); statebackend.PendingDiscardedError when an older one was dropped.
	retryPending(ctx context.Context, suffix string) (saved bool, err error)
	// pending reports a state of suffix that waits to be written.
	pending(suffix string) bool
	// takeWritten is the state a run of suffix stored last, known without a read (found false:
	// read it).
	takeWritten(suffix string) (st statebackend.State, found bool)
	// live reports whether run runID is alive in this controller (its credentials not revoked).
	live(runID string) bool
	// mayRecover says whether lock, which a run left and last records, may be released as the
	// lock of a run that is gone (dead), and whether the fences of runs an earlier manager
	// started apply first (fenced). run is what the controller knows of that run; self is this
	// controller's lock holder (RunIdentity.who).
	mayRecover(suffix string, lock *statebackend.Lock, last *v1alpha1.RunStatus, run *statebackend.RunRecord, self string) (dead, fenced bool)
}

// serverBackend is the state server (statebackend.Server).
type serverBackend struct{ server *statebackend.Server }

func (b serverBackend) store() *statebackend.Store { return b.server.Store() }

func (b serverBackend) configure(spec *tfrunner.Spec, runID, suffix string, labels map[string]string) func() {
	b.server.TakeWritten(suffix) // what readState takes afterwards is this run's
	creds, revoke := b.server.IssueRunAs(runID, suffix, labels)
	spec.RunID = runID
	spec.Backend = tfrunner.Backend{Type: "http"}
	for k, v := range creds.Env() {
		spec.Env[k] = v
	}
	return revoke
}

func (b serverBackend) retryPending(ctx context.Context, suffix string) (bool, error) {
	return b.server.RetryPending(ctx, suffix)
}

func (b serverBackend) pending(suffix string) bool {
	_, pending := b.server.Pending(suffix)
	return pending
}

func (b serverBackend) takeWritten(suffix string) (statebackend.State, bool) {
	return b.server.TakeWritten(suffix)
}

func (b serverBackend) live(runID string) bool { return b.server.Live(runID) }

// mayRecover: the lock stays while the run's state is not saved (PutBack saves it). Runs
// through the state server name themselves in their locks: a lock is recovered only by the id of
// the dead run recorded in status, never by user@host, which a person's own terraform in the pod
// also matches; and only once the dead run's carrier can no longer write (fenced).
func (b serverBackend) mayRecover(suffix string, lock *statebackend.Lock, last *v1alpha1.RunStatus, run *statebackend.RunRecord, self string) (bool, bool) {
	if b.pending(suffix) {
		return false, false
	}
	return isRecordedRunLock(lock, last, run.Alive, self), true
}

// kubernetesBackend is Terraform's kubernetes backend on the state Secrets of config.Namespace,
// read and written by the controller through states (one Store, built in New).
type kubernetesBackend struct {
	states *statebackend.Store
	config statebackend.Config
}

func (b kubernetesBackend) store() *statebackend.Store { return b.states }

func (b kubernetesBackend) configure(spec *tfrunner.Spec, _, suffix string, labels map[string]string) func() {
	spec.Backend = tfrunner.Backend{Type: "kubernetes", Config: b.config.Attributes(suffix, labels)}
	return func() {}
}

// retryPending: runs write their state themselves; nothing is kept pending.
func (kubernetesBackend) retryPending(context.Context, string) (bool, error) { return false, nil }
func (kubernetesBackend) pending(string) bool                                { return false }
func (kubernetesBackend) takeWritten(string) (statebackend.State, bool) {
	return statebackend.State{}, false
}

// live: runs are synchronous with the reconcile, so no run of a resource is alive while it
// reconciles.
func (kubernetesBackend) live(string) bool { return false }

// mayRecover: Terraform's kubernetes backend names the lock's holder user@host; a lock is this
// controller's own stale one by that name and the run recorded (statebackend.IsOwnStaleLock).
func (kubernetesBackend) mayRecover(_ string, lock *statebackend.Lock, _ *v1alpha1.RunStatus, run *statebackend.RunRecord, self string) (bool, bool) {
	return statebackend.IsOwnStaleLock(lock, run, self), false
}
