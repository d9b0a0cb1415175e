package state

// The guards that run before any plan or apply of a resource, in this order (the reconciler's
// beforeRun and stateChecks call them):
//  1. PutBack: a state a run produced but could not save (kept by the state server, or left by
//     Terraform in the workspace as errored.tfstate) is written first — else the next run would
//     plan from the older state and create every object again;
//  2. Adopt: orphaned state is taken over only when spec.adoptState names it;
//  3. (the reconciler's restoreState: an admin's restore annotation puts an earlier version back);
//  4. GuardEmpty: a resource that was ever applied never plans from empty state.
// Each returns an *Error when the run must not happen; the resource then says why.

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Error stops a run because of the resource's state: Reason is the condition reason
// (v1alpha1.Reason*), Message says why and what a person can do. The reconciler retries it after
// its state retry.
type Error struct{ Reason, Message string }

func (e *Error) Error() string { return e.Message }

// PutBack writes the state a run produced but could not save, before anything else runs for the
// resource (h: its state handle). There is one place such a state is kept: the state server's
// pending state (in memory, and in its Secret so that it outlives the controller), whether the
// server received it and could not write it, or Terraform could not send it (errored.tfstate,
// which the Runs carrier hands to the server as soon as the run returns:
// runners.Router.KeepErrored). A state older than the stored one is already saved and is dropped
// (an event says so). An *Error StateNotSaved when it still cannot be written.
func (r *Keeper) PutBack(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) error {
	sfx := h.Suffix()
	// Kept in memory, or in its Secret by a controller that was killed since.
	saved, err := r.backend.retryPending(ctx, sfx)
	var discarded *statebackend.PendingDiscardedError
	if errors.As(err, &discarded) {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonPendingStateDiscarded, "SaveState", "%s", discarded.Error())
		return nil
	}
	if err != nil {
		return &Error{v1alpha1.ReasonStateNotSaved, fmt.Sprintf(
			"the state the last run produced could not be saved to %s and is kept by the controller in %s (%v); its lock is kept and nothing runs until it is saved",
			res.Status.State.SecretName, statebackend.PendingSecretName(statebackend.DefaultWorkspace, sfx), err)}
	}
	if saved {
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateSaved, "SaveState",
			"saved the state the last run produced, which could not be saved when it ended")
	}
	return nil
}

// GuardEmpty refuses to plan a resource that was ever applied from an empty state (h: its state
// handle): its state Secret is gone, and a plan would create every object again beside the
// existing ones. The start-fresh annotation (removed after the next successful apply) lets it
// start from empty state. An *Error StateMissing, or the error of reading the state.
func (r *Keeper) GuardEmpty(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) error {
	applied := EverApplied(res) || Serial(res) > 0
	if !applied || res.Annotations[v1alpha1.AnnotationStartFresh] == "true" {
		return nil
	}
	_, found, err := h.Status(ctx)
	if err != nil || found {
		return err
	}
	return &Error{v1alpha1.ReasonStateMissing, fmt.Sprintf(
		"the resource was applied (state serial %d) but its state %s is gone: planning from empty state would create every object again; "+
			"restore the state (kubectl conductor restore-state, or the %s annotation), or annotate %s=true to start from empty state",
		Serial(res), res.Status.State.SecretName, v1alpha1.AnnotationRestoreState, v1alpha1.AnnotationStartFresh)}
}

// Adopt makes the orphaned state Secret named in spec.adoptState this resource's state (h: its
// state handle), once, before its first plan (see statebackend.Adopt), and records it in
// status.state.adoptedFrom.
//
// A resource that does not ask to adopt never silently takes over state that a deleted Retain
// resource of the same name orphaned: it is refused with a *statebackend.AdoptError until
// spec.adoptState names that Secret.
func (r *Keeper) Adopt(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) error {
	from := res.Spec.AdoptState
	if res.Status.State != nil && res.Status.State.AdoptedFrom == from && from != "" {
		return nil
	}
	if from == "" {
		if EverApplied(res) {
			return nil
		}
		// An orphaned state under the resource's own name (ChooseName then gave it another) is
		// likely the infrastructure this resource means: creating it again would duplicate it.
		own := statebackend.SuffixFor(res.Name)
		if h.Suffix() == own {
			return nil // ChooseName found nothing under its own name: that state is its own
		}
		orphanedFrom, err := r.Store().For(own).OrphanedFrom(ctx)
		if err != nil || orphanedFrom == "" {
			return err
		}
		name := statebackend.SecretName(statebackend.DefaultWorkspace, own)
		return &statebackend.AdoptError{Message: fmt.Sprintf(
			"state Secret %s was orphaned by the deleted resource %s; set spec.adoptState: %s to adopt it, or delete it", name, orphanedFrom, name)}
	}
	if err := h.Adopt(ctx, from, v1alpha1.LabelValue(res.Name)); err != nil {
		return err
	}
	if res.Status.State == nil {
		res.Status.State = &v1alpha1.StateStatus{}
	}
	res.Status.State.AdoptedFrom = from
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateAdopted, "Adopt", "adopted orphaned state %s", from)
	return nil
}
