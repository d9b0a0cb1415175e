package resource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Reclaim: what deleting a resource does to its infrastructure and state (the reclaim policy).

// The deletion phases of a resource (Reconcile runs them in order once it is being deleted):
//  1. protectInUse: a Bound resource waits until its claim is gone (FinalizerInUse, as pv-protection);
//  2. reclaimInfra: Delete destroys the infrastructure and then deletes the state Secret; Retain
//     orphans the state; a state that is not the resource's own is left as it is;
//  3. dropFinalizer: the reclaim finalizer goes.

// protectInUse keeps a resource being deleted while it is bound to a live claim (the claimRef's
// UID matches a claim that is not being deleted), as the pv-protection controller keeps a PV
// (pkg/controller/volume/pvprotection: isBeingUsed); it says so once in an event and in the Ready
// condition, and waits for the claim's deletion (the claim watch requeues the resource). When the
// resource is not in use, FinalizerInUse is removed.
func (r *reclaimer) protectInUse(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	if !controllerutil.ContainsFinalizer(res, v1alpha1.FinalizerInUse) {
		return ctrl.Result{}, nil
	}
	if result, held, err := r.protectShared(ctx, s); held || err != nil {
		return result, err
	}
	claimState, err := observeClaim(ctx, r.api, r.reader, res)
	if err != nil {
		return ctrl.Result{}, err
	}
	if claimState == claimLive {
		ref := res.Spec.ClaimRef
		msg := fmt.Sprintf("deletion waits: the resource is bound to claim %s/%s; it is deleted once the claim is gone", ref.Namespace, ref.Name)
		if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonResourceInUse {
			r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonResourceInUse, "Delete", "%s", msg)
		}
		markInUse(res, msg)
		return s.end(ctrl.Result{}), nil
	}
	controllerutil.RemoveFinalizer(res, v1alpha1.FinalizerInUse)
	return r.updateMeta(ctx, s)
}

// protectShared keeps a shared resource being deleted (by hand: the sharing reconciler deletes
// only one with no share) while shares of it exist, as protectInUse keeps a bound one: their
// claims' buckets or databases live in it. It says so once in an event and in the Ready
// condition, ends the reconcile (held) and looks again in 10 s. It waits, too, within
// the shared grace of a claim's last join: that claim may be making its share.
func (r *reclaimer) protectShared(ctx context.Context, s *resourceScope) (ctrl.Result, bool, error) {
	res := s.res
	if res.Labels[v1alpha1.LabelSharedOf] == "" {
		return ctrl.Result{}, false, nil
	}
	reader := r.reader
	if reader == nil {
		reader = r.api
	}
	shares := &v1alpha1.InfraResourceList{}
	if err := reader.List(ctx, shares, client.MatchingLabels{v1alpha1.LabelShareOf: v1alpha1.LabelValue(res.Name)}); err != nil {
		return ctrl.Result{}, false, err
	}
	var msg string
	switch idle := provision.SharedIdleFor(res, time.Now()); {
	case len(shares.Items) > 0:
		msg = fmt.Sprintf("deletion waits: %d claims hold shares of this shared resource (%s, ...); it is deleted once the last share is gone",
			len(shares.Items), shares.Items[0].Name)
	case idle < r.sharedGrace:
		// A claim marked its join and may be making its share now.
		msg = fmt.Sprintf("deletion waits: a claim took a place %s ago; it is deleted once no share is made within %s of the last join",
			idle.Round(time.Second), r.sharedGrace)
	default:
		return ctrl.Result{}, false, nil
	}
	if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonSharedInUse {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonSharedInUse, "Delete", "%s", msg)
	}
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSharedInUse, msg)
	return s.end(ctrl.Result{RequeueAfter: 10 * time.Second}), true, nil
}

// reclaimInfra carries out the reclaim policy (reclaim) on a resource that has state; the phase is
// Deleting meanwhile. It ends the reconcile while the finalizer must stay; a resource never named
// (it never ran) has no state to reclaim.
func (r *reclaimer) reclaimInfra(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.res, v1alpha1.FinalizerResource) {
		return s.end(ctrl.Result{}), nil
	}
	if s.state == nil {
		return ctrl.Result{}, nil
	}
	s.reclaiming = true
	return r.reclaim(ctx, s)
}

// recordReclaim writes the reclaim's outcome (a checkpoint) before the finalizer goes: after that
// the object may be gone.
func (r *reclaimer) recordReclaim(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if !s.reclaiming {
		return ctrl.Result{}, nil
	}
	if err := s.checkpoint(ctx); apierrors.IsNotFound(err) {
		s.gone = true // its finalizer was removed by hand meanwhile: nothing is left to do
		return s.end(ctrl.Result{}), nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// deleteRunRecords deletes the reclaimed resource's plan and log Secrets.
func (r *reclaimer) deleteRunRecords(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if !s.reclaiming {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.secrets.DeleteRunRecords(ctx, s.res)
}

// dropFinalizer removes the reclaim finalizer: the API server then deletes the object.
func (r *reclaimer) dropFinalizer(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	controllerutil.RemoveFinalizer(s.res, v1alpha1.FinalizerResource)
	if res, err := r.updateMeta(ctx, s); s.ended || err != nil {
		return res, err
	}
	s.gone = true
	return s.end(ctrl.Result{}), nil
}

// updateMeta writes the resource's metadata (its finalizers); a resource already gone ends the
// reconcile with nothing more to write.
func (r *reclaimer) updateMeta(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if err := r.api.Update(ctx, s.res); err != nil {
		s.gone = apierrors.IsNotFound(err)
		return s.end(ctrl.Result{}), client.IgnoreNotFound(err)
	}
	s.base.ResourceVersion = s.res.ResourceVersion
	return ctrl.Result{}, nil
}

// reclaim carries out the reclaim policy on the resource's own state: Retain orphans it, Delete
// destroys the infrastructure and deletes it. A state under the resource's name that another
// resource orphaned (an adoption that was refused or never asked for) is not its own: it is
// neither destroyed, nor deleted, nor relabelled. It ends the reconcile (with when to retry) while
// the finalizer must stay.
func (r *reclaimer) reclaim(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	orphanedFrom, err := s.state.OrphanedFrom(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if orphanedFrom != "" {
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateNotOwned, "Reclaim",
			"state Secret %s is the orphaned state of the deleted resource %s, never adopted by this one: left as it is, and no destroy",
			res.Status.State.SecretName, orphanedFrom)
		return ctrl.Result{}, nil
	}
	if res.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain {
		// The orphaned state must be the newest: a state a run could not save goes back first.
		if err := r.keeper.PutBack(ctx, s.res, s.state); err != nil {
			return r.sync.stateStop(s, "orphan", err)
		}
		if err := s.state.Orphan(ctx, v1alpha1.LabelValue(res.Name)); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.secrets.ReclaimPasswords(ctx, res); err != nil {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateOrphaned, "Reclaim",
			"reclaim policy Retain: infrastructure kept, state Secret %s labelled %s=%s",
			res.Status.State.SecretName, statebackend.LabelOrphanedFrom, v1alpha1.LabelValue(res.Name))
		return ctrl.Result{}, nil
	}
	if err := r.destroy(ctx, s); err != nil {
		var se *state.Error
		var fenced *state.LockFenced
		switch {
		case errors.As(err, &se):
			return s.end(ctrl.Result{RequeueAfter: stateRetry}), nil
		case errors.As(err, &fenced):
			return s.end(ctrl.Result{RequeueAfter: fenced.Wait}), nil
		}
		return ctrl.Result{}, err
	}
	// The infrastructure is gone and so is its state: its passwords go too.
	return ctrl.Result{}, r.secrets.ReclaimPasswords(ctx, res)
}

// destroy runs terraform destroy (when there is state), records that it did (status.state.destroyed,
// a checkpoint), and only then deletes the state Secret and Lease: a write lost after the deletion
// (a conflict on the finalizer, a restart) finds the record and finishes the reclaim, never a
// "missing" state. Like every run it first releases its own stale lock and records itself as Running.
func (r *reclaimer) destroy(ctx context.Context, s *resourceScope) error {
	res := s.res
	if destroyedEarlier(res) {
		// An earlier reconcile destroyed and recorded it; the deletion may not have happened.
		return s.state.Delete(ctx)
	}
	// A state a run could not save is saved first: destroy must see every object.
	if err := r.keeper.PutBack(ctx, s.res, s.state); err != nil {
		var se *state.Error
		if errors.As(err, &se) {
			r.sync.setRunFailed(res, "destroy", se.Reason, se.Message, time.Now())
		}
		return err
	}
	// An operator's restore of a missing state (stateMissingOnDelete) is carried out here too.
	if err := r.sync.restoreState(ctx, s); err != nil {
		var se *state.Error
		if errors.As(err, &se) {
			r.sync.setRunFailed(res, "destroy", se.Reason, se.Message, time.Now())
		}
		return err
	}
	st, found, err := s.state.Status(ctx)
	if err != nil {
		return err
	}
	if !found {
		// The cache may lag behind this controller's own record of a destroy whose state it then
		// deleted (issue 46: a spurious StateMissing): the API server decides.
		if destroyed, err := r.destroyedPerAPIServer(ctx, res); err != nil {
			return err
		} else if destroyed {
			return s.state.Delete(ctx)
		}
		if err := r.stateMissingOnDelete(res); err != nil {
			return err
		}
	}
	if ran, err := r.resolveCreatesOnDelete(ctx, s); err != nil {
		return err
	} else if ran {
		// Objects adopted are in state now (a state may exist only from them): destroy sees them.
		if st, found, err = s.state.Status(ctx); err != nil {
			return err
		}
	}
	if err := r.createsInDoubtOnDelete(res); err != nil {
		return err
	}
	if found && st.Resources > 0 {
		if st, err = r.runDestroy(ctx, s, st); err != nil {
			return err
		}
	}
	if found {
		if err := recordDestroyed(ctx, s, st.Serial); err != nil {
			return err
		}
	}
	return s.state.Delete(ctx)
}

// runDestroy runs terraform destroy on the resource's state st and returns the state it left (its
// serial as the run stored it; st's when unknown). The Running record is a checkpoint, as every
// run's; the outcome is recorded in status.lastRun.
func (r *reclaimer) runDestroy(ctx context.Context, s *resourceScope, st statebackend.State) (statebackend.State, error) {
	res := s.res
	spec, err := r.secrets.RunSpec(ctx, res)
	if err != nil {
		r.sync.setRunFailed(res, "destroy", v1alpha1.ReasonDestroyFailed, err.Error(), time.Now())
		return st, err
	}
	done, err, stopped := r.reclaimRun(ctx, s, "destroy", &spec, func() error { return r.runs.Destroy(ctx, res.Name, spec) })
	if stopped != nil {
		return st, stopped
	}
	if err != nil {
		r.sync.setRunFailed(res, "destroy", v1alpha1.ReasonDestroyFailed, terraformMessage(err), done)
		return st, err
	}
	res.Status.LastRun.Result = v1alpha1.RunSucceeded
	res.Status.LastRun.CompletionTime = &metav1.Time{Time: done}
	if written, ok := r.keeper.TakeWritten(s.state.Suffix()); ok {
		st = written
	}
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonDestroyed, "Reclaim", "reclaim policy Delete: infrastructure destroyed")
	return st, nil
}

// reclaimRun is one run of a reclaim (op "destroy", or "plan" for resolveCreatesOnDelete), as
// every run goes: a dead run's lock recovered first (a *state.LockFenced waits), the run recorded as
// Running in status (a checkpoint), fn run with the run's state credentials in spec, and its
// duration observed. It returns when fn ended and fn's error; stopped is what kept fn from running
// (the lock recovery's or the checkpoint's error).
func (r *reclaimer) reclaimRun(ctx context.Context, s *resourceScope, op string, spec *tfrunner.Spec, fn func() error) (done time.Time, err, stopped error) {
	if err := r.keeper.RecoverOwnLock(ctx, s.res, s.state, nil); err != nil {
		return time.Time{}, nil, err
	}
	beginRun(&s.res.Status, r.sync.identity.newRun(s.res, op, time.Now()))
	if err := s.checkpoint(ctx); err != nil {
		return time.Time{}, nil, err
	}
	revoke := r.keeper.UseBackend(s.res, spec)
	err = fn()
	revoke()
	done = time.Now()
	metrics.ObserveRun(op, runResult(nil, err), done.Sub(s.res.Status.LastRun.StartTime.Time))
	return done, err, nil
}

// terraformMessage is what a run's error says to people: Terraform's diagnostics for a
// *tfrunner.RunError, the error's text otherwise.
func terraformMessage(err error) string {
	var re *tfrunner.RunError
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}

// recordDestroyed writes status.state.destroyed (serial, now) as a checkpoint, before the state
// Secret is deleted: once the deletion happened, only this record tells a reclaim that finished its
// destroy from a state that went missing.
func recordDestroyed(ctx context.Context, s *resourceScope, serial int64) error {
	if s.res.Status.State == nil {
		s.res.Status.State = &v1alpha1.StateStatus{}
	}
	s.res.Status.State.Destroyed = &v1alpha1.StateDestroyed{Serial: serial, Time: metav1.Now()}
	return s.checkpoint(ctx)
}

// destroyedPerAPIServer reads the resource from the API server (not the cache) and reports whether
// an earlier reconcile recorded its destroy; when it did, res gets that record. It returns the
// read's error; a resource gone is not destroyed here.
func (r *reclaimer) destroyedPerAPIServer(ctx context.Context, res *v1alpha1.InfraResource) (bool, error) {
	if r.reader == nil || destroyedEarlier(res) {
		return destroyedEarlier(res), nil
	}
	latest := &v1alpha1.InfraResource{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(res), latest); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !destroyedEarlier(latest) {
		return false, nil
	}
	if res.Status.State == nil {
		res.Status.State = &v1alpha1.StateStatus{}
	}
	res.Status.State.Destroyed = latest.Status.State.Destroyed.DeepCopy()
	return true, nil
}

// destroyedEarlier reports a reclaim that recorded its destroy (recordDestroyed) in an earlier
// reconcile.
func destroyedEarlier(res *v1alpha1.InfraResource) bool {
	return res.Status.State != nil && res.Status.State.Destroyed != nil
}

// createsInDoubtOnDelete decides a Delete reclaim of a resource whose creates a run that died had
// started are unresolved (status.createsPending): destroy sees only what the state holds, so objects
// those creates made would be left behind unseen. Those the identities decide were settled first
// (resolveCreatesOnDelete); for the rest the finalizer stays, with reason CreatesInDoubt naming
// them, until they are resolved or an operator annotates conductor.io/abandon=true: an event then says they are left
// as they are, and the reclaim goes on. It returns a *state.Error to wait.
func (r *reclaimer) createsInDoubtOnDelete(res *v1alpha1.InfraResource) error {
	if len(res.Status.CreatesPending) == 0 {
		return nil
	}
	addresses := strings.ReplaceAll(strings.Join(res.Status.CreatesPending, ", "), v1alpha1.CreatesUnrecorded,
		"any object of the module outside its state (the run died during its apply before it could record which creates it had started)")
	if res.Annotations[v1alpha1.AnnotationAbandon] == "true" {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonAbandoned, "Reclaim",
			"%s=true: whatever a run that died may have created of %s is left as it is; destroy removes what the state holds",
			v1alpha1.AnnotationAbandon, addresses)
		return nil
	}
	msg := fmt.Sprintf("a run that died had started creating %s: if it did, no state holds them and destroy cannot remove them. "+
		"The resource stays until they are resolved: look for them and delete them, then annotate %s=true "+
		"(kubectl conductor creates RESOURCE --abandon)", addresses, v1alpha1.AnnotationAbandon)
	r.sync.setRunFailed(res, "destroy", v1alpha1.ReasonCreatesInDoubt, msg, time.Now())
	return &state.Error{Reason: v1alpha1.ReasonCreatesInDoubt, Message: msg}
}

// stateMissingOnDelete decides a Delete reclaim whose state is missing. A resource that never
// applied has nothing to destroy. One that applied (its infrastructure exists, and nothing says
// where) keeps its finalizer with reason StateMissing, until the state is restored, or an operator
// annotates conductor.io/abandon=true (the infrastructure is left, an event says so) or
// conductor.io/start-fresh=true (there is nothing left to destroy). It returns a *state.Error to wait.
func (r *reclaimer) stateMissingOnDelete(res *v1alpha1.InfraResource) error {
	applied := state.EverApplied(res) || state.Serial(res) > 0
	switch {
	case !applied:
		return nil
	case res.Annotations[v1alpha1.AnnotationAbandon] == "true":
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonAbandoned, "Reclaim",
			"%s=true: the state is missing and the infrastructure was not destroyed; it is left as it is", v1alpha1.AnnotationAbandon)
		return nil
	case res.Annotations[v1alpha1.AnnotationStartFresh] == "true":
		return nil
	}
	msg := fmt.Sprintf("reclaim policy Delete, but the state %s of this applied resource (serial %d) is missing: nothing is destroyed "+
		"and the resource stays until the state is restored (kubectl conductor restore-state, or the %s annotation), "+
		"or %s=true leaves the infrastructure as it is, or %s=true says nothing is left to destroy",
		statebackend.SecretName(statebackend.DefaultWorkspace, state.Suffix(res)), state.Serial(res), v1alpha1.AnnotationRestoreState,
		v1alpha1.AnnotationAbandon, v1alpha1.AnnotationStartFresh)
	r.sync.setRunFailed(res, "destroy", v1alpha1.ReasonStateMissing, msg, time.Now())
	return &state.Error{Reason: v1alpha1.ReasonStateMissing, Message: msg}
}
