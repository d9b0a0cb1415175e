// Package state is the resource reconciler's state part: it names a resource's state once, hands
// out its state handle, points a run at where state is kept (the state server's http backend or
// Terraform's kubernetes backend, chosen once in New), and guards runs with the state's facts: a
// state a run could not save is put back first, a resource that was applied never plans from
// empty state, orphaned state is adopted only when asked, and a dead run's lock is recovered only
// once its carrier can no longer write (the Fence).
//
// Every method takes the resource and, where it reads or writes state, the resource's one state
// handle (statebackend.Handle); none holds per-resource state or the reconciler.
package state

import (
	"context"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Options are what a Keeper uses; New copies them.
type Options struct {
	// Recorder says what the keeper did (lock recovered, state saved, adopted).
	Recorder events.EventRecorder
	// Server is the controller's state server; nil: runs use Terraform's kubernetes backend on
	// Kube, in Config.Namespace.
	Server *statebackend.Server
	Kube   kubernetes.Interface
	Config statebackend.Config
	// Fence is the fence of runs an earlier manager started (shared with the reconciler).
	Fence *Fence
	// Who is the lock holder of this deployment's runs (statebackend.Who when empty); Controller
	// names this pod, as runs record it.
	Who, Controller string
	// StaleLockAfter is how long a lock is held before status calls it stale
	// (DefaultStaleLockAfter when ≤ 0).
	StaleLockAfter time.Duration
}

// Keeper names, guards, locks and reads resources' state.
type Keeper struct {
	recorder       events.EventRecorder
	config         statebackend.Config
	backend        stateBackend
	names          *Names // nil: a name is checked with the API server
	fence          *Fence
	who            string
	controller     string
	staleLockAfter time.Duration
}

// New returns the Keeper of o, its backend chosen once: the state server when o.Server is set,
// else Terraform's kubernetes backend on the same Secrets.
func New(o Options) *Keeper {
	k := &Keeper{recorder: o.Recorder, config: o.Config, fence: o.Fence, who: o.Who, controller: o.Controller,
		staleLockAfter: o.StaleLockAfter}
	if k.who == "" {
		k.who = statebackend.Who()
	}
	if k.staleLockAfter <= 0 {
		k.staleLockAfter = DefaultStaleLockAfter
	}
	if o.Server != nil {
		k.backend = serverBackend{server: o.Server}
	} else {
		k.backend = kubernetesBackend{states: statebackend.NewStore(o.Kube, o.Config.Namespace), config: o.Config}
	}
	return k
}

// UseNames answers ChooseName's "is this name taken" from names' cache from now on (set once, at
// setup, before the first reconcile).
func (r *Keeper) UseNames(names *Names) { r.names = names }

// Handle is the resource's state in the state namespace, labelled with the resource.
func (r *Keeper) Handle(res *v1alpha1.InfraResource) *statebackend.Handle {
	return r.Store().For(Suffix(res)).WithLabels(Labels(res))
}

// Store is the Secrets and Leases states live in.
func (r *Keeper) Store() *statebackend.Store { return r.backend.store() }

// Labels are the labels of a resource's state Secret (LabelResource: its hashed name).
func Labels(res *v1alpha1.InfraResource) map[string]string {
	return map[string]string{statebackend.LabelResource: v1alpha1.LabelValue(res.Name)}
}

// UseBackend configures a run's state in spec: the state server's http backend, with credentials
// issued for the run status.lastRun records and this resource only (revoke when the run ends), or,
// without a server, Terraform's kubernetes backend on the same Secrets.
func (r *Keeper) UseBackend(res *v1alpha1.InfraResource, spec *tfrunner.Spec) (revoke func()) {
	runID := ""
	if res.Status.LastRun != nil {
		runID = res.Status.LastRun.ID
	}
	return r.backend.configure(spec, runID, Suffix(res), Labels(res))
}

// TakeWritten is the state the last run of suffix stored through the state server, known without
// a read (found false: read it).
func (r *Keeper) TakeWritten(suffix string) (st statebackend.State, found bool) {
	return r.backend.takeWritten(suffix)
}

// Seal is text encrypted as the states are (statebackend.Keyring.SealDocument: OpenTofu's
// encrypted document format, with the current passphrase), for a Secret that shows people what a
// state holds (a plan's rendering); text itself when states are not encrypted (no state server, or
// no key). `kubectl conductor plan` opens it with the state key Secret.
func (r *Keeper) Seal(text string) (string, error) {
	if text == "" {
		return text, nil
	}
	keys := r.backend.store().Keyring()
	if keys == nil {
		return text, nil
	}
	sealed, err := keys.SealDocument([]byte(text))
	return string(sealed), err
}

// ChooseName gives a resource its state name once, before anything touches state, and records
// it in status.state.secretName; it is never derived again, so a resource keeps the state it
// started with (resources made before this rule keep the name their first run recorded). The name
// is statebackend.SuffixFor of the resource's name, collision-free by construction, unless a state
// Secret or lock Lease of that suffix already exists — an orphaned state of an earlier resource of
// the same name, say — which is never this new resource's: then the suffix of name/uid. It reports
// whether the status changed, and the error of reading whether the name is taken.
func (r *Keeper) ChooseName(ctx context.Context, res *v1alpha1.InfraResource) (bool, error) {
	if Suffix(res) != "" {
		return false, nil
	}
	sfx := statebackend.SuffixFor(res.Name)
	taken, err := r.names.taken(ctx, r.Store().For(sfx), r.config.Namespace)
	if err != nil {
		return false, err
	}
	if taken {
		sfx = statebackend.SuffixFor(res.Name + "/" + string(res.UID))
	}
	if res.Status.State == nil {
		res.Status.State = &v1alpha1.StateStatus{}
	}
	res.Status.State.SecretName = statebackend.SecretName(statebackend.DefaultWorkspace, sfx)
	return true, nil
}

// Read records the state's serial and lineage in res's status (h: its state handle), after a run
// that ended on its own: it released its lock, so status shows none (a lock taken since is seen
// when a run meets it, LockHeld). A state the run stored through the state server is known without
// a read (Server.TakeWritten); a failed read records only the name.
func (r *Keeper) Read(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) {
	sfx := h.Suffix()
	st, found := r.backend.takeWritten(sfx)
	var err error
	if !found {
		st, found, err = h.Status(ctx)
	}
	// The name is the one chosen once, whatever the read says: a failed read must not erase it.
	res.Status.State = &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, sfx), AdoptedFrom: adoptedFrom(res)}
	if err != nil || !found {
		return
	}
	res.Status.State.Serial = st.Serial
	res.Status.State.Lineage = st.Lineage
}

func adoptedFrom(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return res.Status.State.AdoptedFrom
}

// Suffix is the state Secret suffix of a resource: the one recorded in status.state.secretName
// when its state name was chosen (ChooseName), or "" for a resource that never had one.
func Suffix(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return statebackend.SuffixOf(res.Status.State.SecretName)
}

// Serial is the state serial status records, 0 before any.
func Serial(res *v1alpha1.InfraResource) int64 {
	if res.Status.State == nil {
		return 0
	}
	return res.Status.State.Serial
}

// EverApplied reports whether an apply of some generation of res succeeded (status.observedGeneration
// set): the state guards and the reconciler's phases ask it alike.
func EverApplied(res *v1alpha1.InfraResource) bool { return res.Status.ObservedGeneration > 0 }
