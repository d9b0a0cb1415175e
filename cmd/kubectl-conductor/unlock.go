package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

func newUnlockCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "unlock " + targetArg,
		Short: "Release a state lock that the controller reports as stale",
		Long: `Release the lock on a resource's Terraform state, only when the controller reports it as stale:
status.state.lockStale is true (held by someone other than the controller's live runs for longer
than its --stale-lock-after) and status.state.lockID names it. The lock Lease in the controller
namespace is released only while it is still held under that id.

Otherwise it refuses and names the holder and since when it holds the lock: a live run's lock, or
anyone's current lock, is never released; wait for the run to end, or for the controller to
report the lock as stale.

Example:
  kubectl conductor unlock my-bucket -n team-a
  kubectl conductor unlock ires-0f3c2a --controller-namespace conductor-system`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runUnlock(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

// runUnlock releases the stale state lock of TARGET name and writes what it released to out.
// Errors: those of resolve; the controller reports no lock; the lock is not reported stale
// (holder and since named); the Lease is gone, or now held under another id (the holder named).
func runUnlock(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	now := cl.Now()
	st := t.Resource.Status.State
	if st == nil || st.LockID == "" {
		return fmt.Errorf("%s: the controller reports no lock on its state; nothing to release", t)
	}
	since := stamp(now, st.LockedSince)
	if !st.LockStale {
		return fmt.Errorf("%s: the state is locked by %s since %s under lock %s, and the controller does not report "+
			"this lock as stale: not released. Only a lock the controller reports as stale "+
			"(status.state.lockStale) can be released, never a live run's or anyone's current lock",
			t, orDash(st.LockHolder), since, st.LockID)
	}
	suffix := stateSuffix(t.Resource)
	lease := cl.ControllerNamespace + "/" + statebackend.LeaseName(statebackend.DefaultWorkspace, suffix)
	state := statebackend.NewStore(cl.Kube, cl.ControllerNamespace).For(suffix)
	err = state.ReleaseLock(ctx, st.LockID)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: the lock Lease %s does not exist: the lock is already gone", t, lease)
	}
	if err != nil {
		msg := fmt.Sprintf("%s: stale lock %s not released: %v", t, st.LockID, err)
		if cur, ierr := state.InspectLock(ctx); ierr == nil {
			if cur == nil {
				msg += " (the state is no longer locked)"
			} else {
				msg += fmt.Sprintf(" (the state is now locked by %s since %s, lock %s: not the lock the controller reported stale)",
					orDash(cur.Who), cur.Created.UTC().Format(time.RFC3339), cur.ID)
			}
		}
		return errors.New(msg)
	}
	fmt.Fprintf(out, "Released the stale lock %s on the state of %s.\n", st.LockID, t)
	fmt.Fprintf(out, "It was held by %s since %s; Lease %s.\n", orDash(st.LockHolder), since, lease)
	return nil
}
