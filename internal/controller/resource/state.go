package resource

// The state phases of a reconcile that are the reconciler's own: stateChecks, and restoreState
// (an admin's restore annotation, recorded as a run). The guards themselves (put back, adopt, the
// empty-state guard, lock recovery) are resource/state's.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
)

// restoreState carries out the restore annotation: the version of the state with that serial,
// from the state's history, becomes the current state (with the next serial; the replaced
// version stays in history, so a restore can be undone). The annotation is removed once done.
func (r *syncer) restoreState(ctx context.Context, s *resourceScope) error {
	res := s.res
	want, ok := res.Annotations[v1alpha1.AnnotationRestoreState]
	if !ok {
		return nil
	}
	serial, err := strconv.ParseInt(want, 10, 64)
	if err == nil {
		// Recorded as a run before it locks the state (a checkpoint): a crash mid-restore leaves
		// a lock that RecoverOwnLock releases by this run's id.
		beginRun(&res.Status, r.identity.newRun(res, "restore", time.Now()))
		if err := s.checkpoint(ctx); err != nil {
			return err
		}
		err = s.state.Restore(ctx, serial, res.Status.LastRun.ID)
	}
	if err != nil {
		return &state.Error{Reason: v1alpha1.ReasonStateRestoreFailed, Message: fmt.Sprintf(
			"%s=%q: %v (remove the annotation, or name a serial from the state's history)", v1alpha1.AnnotationRestoreState, want, err)}
	}
	if err := removeAnnotation(ctx, r.api, res, v1alpha1.AnnotationRestoreState); err != nil {
		return err
	}
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateRestored, "RestoreState",
		"restored serial %d of the state from its history", serial)
	return nil
}

// stateChecks runs the state phases after PutBack (which beforeRun runs first, before lock
// recovery), in order, before a run: the restore annotation, then the empty-state guard.
func (r *syncer) stateChecks(ctx context.Context, s *resourceScope) error {
	if err := r.restoreState(ctx, s); err != nil {
		return err
	}
	return r.keeper.GuardEmpty(ctx, s.res, s.state)
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
