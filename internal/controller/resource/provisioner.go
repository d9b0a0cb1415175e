package resource

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
)

// provisioner is what the reconciler does with a resource past its binding, chosen once in New
// (newParts), so that Reconcile has one phase list and asks nothing of Runs: provisioning, with
// Runs, runs Terraform; bindingOnly, without, provisions nothing (as crossplane-runtime's
// NopClient reports every external resource as existing and up to date).
type provisioner interface {
	// phases run after the binding was observed (observeBinding), in order.
	phases() []resourcePhase
	// reclaimPhases run once the resource is being deleted, in order.
	reclaimPhases() []resourcePhase
	// provisions: a resource is Pending until its first apply (phaseOf); otherwise it takes its
	// binding's phase at once.
	provisions() bool
	// watch adds what the provisioner's phases wait on to the controller b builds, with what mgr
	// caches; an error is the manager's (an informer it could not start).
	watch(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error)
}

// provisioning is the provisioner of a reconciler with Runs: a resource's state is named, a
// Released resource whose policy is Delete is deleted, and the run phases plan and apply it.
type provisioning struct {
	api      client.Client
	recorder events.EventRecorder
	runs     Runs
	keeper   *state.Keeper
	sync     *syncer
	drift    *drifter
	reclaim  *reclaimer
	// stateNamespace is where state Secrets are listed from the cache (state.NewNames).
	stateNamespace string
	// run and reclaimList are the phase lists, built once (newProvisioning).
	run, reclaimList []resourcePhase
}

// newProvisioning builds the provisioning provisioner and its two phase lists, once.
func newProvisioning(p provisioning) *provisioning {
	sy, rc := p.sync, p.reclaim
	p.run = []resourcePhase{
		p.reclaimReleased,     // Released: Retain keeps it, Delete deletes it
		p.awaitClaim,          // discovered and unbound: nothing runs (discovered.go)
		p.nameState,           // the state name, chosen once
		sy.holdWhilePaused,    // conductor.io/paused: nothing runs (pause.go)
		sy.decideRun,          // a run is due, or the resource is idle until it is (sync.go)
		sy.prepareRun,         // the state phases and the run's inputs
		sy.attachRun,          // a run the previous leader started, adopted here: its outcome (adopt.go)
		p.drift.checkForDrift, // a drift check instead of an apply, when the spec was applied (drift.go)
		sy.applyPhase,         // apply, or plan, approval and apply; then the outcome
	}
	p.reclaimList = []resourcePhase{
		rc.protectInUse,     // a resource bound to a live claim waits for it (FinalizerInUse)
		rc.reclaimInfra,     // the reclaim policy: Retain orphans the state, Delete destroys (reclaim.go)
		rc.recordReclaim,    // its outcome written before the finalizer goes
		rc.deleteRunRecords, // plan and log Secrets
		rc.dropFinalizer,    // FinalizerResource: the API server deletes the object
	}
	return &p
}

func (p *provisioning) phases() []resourcePhase        { return p.run }
func (p *provisioning) reclaimPhases() []resourcePhase { return p.reclaimList }

func (p *provisioning) provisions() bool { return true }

// watch answers state names from the cache (not an API request each) and wakes the resource of
// each run a runner resumed here and this manager adopted (Runs.Resumed), to attach to it.
func (p *provisioning) watch(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	names, err := state.NewNames(mgr, p.stateNamespace)
	if err != nil {
		return nil, err
	}
	p.keeper.UseNames(names)
	return b.WatchesRawSource(resumedRuns(p.runs.Resumed())), nil
}

// reclaimReleased ends the reconcile of a Released resource (its claim was deleted): Retain keeps
// it as it is; Delete deletes the object, whose finalizer then destroys the infrastructure and
// the state (reclaimPhases).
func (p *provisioning) reclaimReleased(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if s.phase != v1alpha1.ResourceReleased {
		return ctrl.Result{}, nil
	}
	res := s.res
	if res.Spec.ReclaimPolicy != v1alpha1.ReclaimRetain {
		p.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonReleased, "Reclaim", "reclaim policy Delete: deleting the resource")
		if err := p.api.Delete(ctx, res); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	return s.end(ctrl.Result{}), nil
}

// nameState gives the resource its state name once (state.Keeper.ChooseName) and the scope its
// state handle.
func (p *provisioning) nameState(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if _, err := p.keeper.ChooseName(ctx, s.res); err != nil {
		return ctrl.Result{}, err
	}
	s.state = p.keeper.Handle(s.res)
	return ctrl.Result{}, nil
}

// bindingOnly is the provisioner of a reconciler without Runs (the binding suites, which test the
// controller's decisions only): nothing is named, run or destroyed; a resource takes its
// binding's phase at once, a Released one stays Released whatever its policy, and a deleted one
// loses its finalizers once no live claim is bound to it.
type bindingOnly struct{ reclaimList []resourcePhase }

// newBindingOnly builds the bindingOnly provisioner: of rc's reclaim phases, the finalizers' only.
func newBindingOnly(rc *reclaimer) bindingOnly {
	return bindingOnly{reclaimList: []resourcePhase{rc.protectInUse, rc.dropFinalizer}}
}

func (bindingOnly) phases() []resourcePhase { return nil }

func (b bindingOnly) reclaimPhases() []resourcePhase { return b.reclaimList }

func (bindingOnly) provisions() bool { return false }

func (bindingOnly) watch(_ ctrl.Manager, b *builder.Builder) (*builder.Builder, error) { return b, nil }
