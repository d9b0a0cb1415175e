package resource

// The state phases that run before any plan or apply of a resource, in this order:
//  1. putBackState: a state a run produced but could not save (kept by the state server, or left
//     by Terraform in the workspace as errored.tfstate) is written first — else the next run
//     would plan from the older state and create every object again;
//  2. restoreState: an admin's restore annotation puts an earlier version back;
//  3. guardEmptyState: a resource that was ever applied never plans from empty state.
// Each phase returns a *stateError when the run must not happen; the resource then says why.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// stateError stops a run because of the resource's state; it is retried after stateRetry.
type stateError struct{ reason, message string }

func (e *stateError) Error() string { return e.message }

// stateHandle is the resource's state in the state namespace, labelled with the resource.
func (r *stateKeeper) stateHandle(res *v1alpha1.InfraResource) *statebackend.Handle {
	return r.states().For(suffix(res)).WithLabels(stateLabels(res))
}

func (r *stateKeeper) states() *statebackend.Store { return r.backend.store() }

func stateLabels(res *v1alpha1.InfraResource) map[string]string {
	return map[string]string{statebackend.LabelResource: v1alpha1.LabelValue(res.Name)}
}

// useBackend configures a run's state: the state server's http backend, with credentials issued
// for this run and this resource only (revoke when the run ends), or, without a server, Terraform's
// kubernetes backend on the same Secrets.
func (r *stateKeeper) useBackend(s *resourceScope, spec *tfrunner.Spec) (revoke func()) {
	res := s.res
	runID := ""
	if res.Status.LastRun != nil {
		runID = res.Status.LastRun.ID
	}
	return r.backend.configure(spec, runID, suffix(res), stateLabels(res))
}

// putBackState writes the state a run produced but could not save, before anything else runs for
// the resource. There is one place such a state is kept: the state server's pending state (in
// memory, and in its Secret so that it outlives the controller), whether the server received it
// and could not write it, or Terraform could not send it (errored.tfstate, which the Runs carrier
// hands to the server as soon as the run returns: runners.Router.KeepErrored). A state older than
// the stored one is already saved and is dropped.
func (r *stateKeeper) putBackState(ctx context.Context, s *resourceScope) error {
	res, sfx := s.res, s.state.Suffix()
	// Kept in memory, or in its Secret by a controller that was killed since.
	saved, err := r.backend.retryPending(ctx, sfx)
	var discarded *statebackend.PendingDiscardedError
	if errors.As(err, &discarded) {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonPendingStateDiscarded, "SaveState", "%s", discarded.Error())
		return nil
	}
	if err != nil {
		return &stateError{v1alpha1.ReasonStateNotSaved, fmt.Sprintf(
			"the state the last run produced could not be saved to %s and is kept by the controller in %s (%v); its lock is kept and nothing runs until it is saved",
			res.Status.State.SecretName, statebackend.PendingSecretName(statebackend.DefaultWorkspace, sfx), err)}
	}
	if saved {
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateSaved, "SaveState",
			"saved the state the last run produced, which could not be saved when it ended")
	}
	return nil
}

// restoreState carries out the restore annotation: the version of the state with that serial,
// from the state's history, becomes the current state (with the next serial; the replaced
// version stays in history, so a restore can be undone). The annotation is removed once done.
func (r *stateKeeper) restoreState(ctx context.Context, s *resourceScope) error {
	res := s.res
	want, ok := res.Annotations[v1alpha1.AnnotationRestoreState]
	if !ok {
		return nil
	}
	serial, err := strconv.ParseInt(want, 10, 64)
	if err == nil {
		// Recorded as a run before it locks the state (a checkpoint): a crash mid-restore leaves
		// a lock that recoverOwnLock releases by this run's id.
		beginRun(&res.Status, r.identity.newRun(res, "restore", time.Now()))
		if err := s.checkpoint(ctx); err != nil {
			return err
		}
		err = s.state.Restore(ctx, serial, res.Status.LastRun.ID)
	}
	if err != nil {
		return &stateError{v1alpha1.ReasonStateRestoreFailed, fmt.Sprintf(
			"%s=%q: %v (remove the annotation, or name a serial from the state's history)", v1alpha1.AnnotationRestoreState, want, err)}
	}
	if err := removeAnnotation(ctx, r.api, res, v1alpha1.AnnotationRestoreState); err != nil {
		return err
	}
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateRestored, "RestoreState",
		"restored serial %d of the state from its history", serial)
	return nil
}

// guardEmptyState refuses to plan a resource that was ever applied from an empty state: its state
// Secret is gone, and a plan would create every object again beside the existing ones. The
// start-fresh annotation (removed after the next successful apply) lets it start from empty state.
func (r *stateKeeper) guardEmptyState(ctx context.Context, s *resourceScope) error {
	res := s.res
	applied := everApplied(res) || (res.Status.State != nil && res.Status.State.Serial > 0)
	if !applied || res.Annotations[v1alpha1.AnnotationStartFresh] == "true" {
		return nil
	}
	_, found, err := s.state.Status(ctx)
	if err != nil || found {
		return err
	}
	return &stateError{v1alpha1.ReasonStateMissing, fmt.Sprintf(
		"the resource was applied (state serial %d) but its state %s is gone: planning from empty state would create every object again; "+
			"restore the state (kubectl conductor restore-state, or the %s annotation), or annotate %s=true to start from empty state",
		serialOf(res), res.Status.State.SecretName, v1alpha1.AnnotationRestoreState, v1alpha1.AnnotationStartFresh)}
}

func serialOf(res *v1alpha1.InfraResource) int64 {
	if res.Status.State == nil {
		return 0
	}
	return res.Status.State.Serial
}

// sealText is text encrypted as the states are (statebackend.Keyring.SealDocument: OpenTofu's
// encrypted document format, with the current passphrase), for a Secret that shows people what a
// state holds (a plan's rendering); text itself when states are not encrypted (no state server, or
// no key). `kubectl conductor plan` opens it with the state key Secret.
func (r *stateKeeper) sealText(text string) (string, error) {
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

// stateChecks runs the state phases after putBackState (which beforeRun runs first, before lock
// recovery), in order, before a run.
func (r *stateKeeper) stateChecks(ctx context.Context, s *resourceScope) error {
	for _, phase := range []func(context.Context, *resourceScope) error{r.restoreState, r.guardEmptyState} {
		if err := phase(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// removeAnnotation deletes one annotation of the resource (a merge patch: no conflict with other
// writers) and from the object in memory. The patch is sent on a copy: the server's answer carries
// the stored status, which must not replace the status this reconcile holds in memory (a run's
// outcome not written yet), nor a spec another writer set meanwhile the one it runs.
func removeAnnotation(ctx context.Context, c client.Client, res *v1alpha1.InfraResource, key string) error {
	obj := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: res.Name}}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+key+`":null}}}`))); err != nil {
		return err
	}
	delete(res.Annotations, key)
	takeVersion(res, obj)
	return nil
}

// chooseStateName gives a resource its state name once, before anything touches state, and records
// it in status.state.secretName; it is never derived again, so a resource keeps the state it
// started with (resources made before this rule keep the name their first run recorded). The name
// is statebackend.SuffixFor of the resource's name, collision-free by construction, unless a state
// Secret or lock Lease of that suffix already exists — an orphaned state of an earlier resource of
// the same name, say — which is never this new resource's: then the suffix of name/uid. It reports
// whether the status changed.
func (r *stateKeeper) chooseStateName(ctx context.Context, res *v1alpha1.InfraResource) (bool, error) {
	if suffix(res) != "" {
		return false, nil
	}
	sfx := statebackend.SuffixFor(res.Name)
	taken, err := r.names.taken(ctx, r.states().For(sfx), r.config.Namespace)
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

// readState records the state Secret's serial and lineage in status, after a run that ended on its
// own: it released its lock, so status shows none (a lock taken since is seen when a run meets it,
// lockHeld).
//
// A state the run stored through the state server is known without a read (Server.TakeWritten).
func (r *stateKeeper) readState(ctx context.Context, s *resourceScope) {
	res, sfx := s.res, s.state.Suffix()
	st, found := r.backend.takeWritten(sfx)
	var err error
	if !found {
		st, found, err = s.state.Status(ctx)
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

// suffix is the state Secret suffix of a resource: the one recorded in status.state.secretName when
// its state name was chosen (chooseStateName), or "" for a resource that never had one.
func suffix(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return statebackend.SuffixOf(res.Status.State.SecretName)
}
