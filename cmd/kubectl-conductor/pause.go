package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func newPauseCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "pause " + targetArg,
		Short: "Pause a resource: no plan, apply or drift check until it is resumed",
		Long: `Annotate the resource conductor.io/paused=true. The controller then starts no plan, apply or
drift check for it (a run under way finishes) and shows Synced=False with reason ReconcilePaused;
deleting the resource, or its claim, still reclaims it. Resume with ` + "`kubectl conductor resume`" + `.

Example:
  kubectl conductor pause my-bucket -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runPause(cmd.Context(), o.streams.Out, cl, args[0], true)
		}),
	}
}

func newResumeCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "resume " + targetArg,
		Short: "Resume a paused resource; it is synced at once",
		Long: `Remove the resource's conductor.io/paused annotation. The controller syncs it at once: a drift
check when its spec was applied, else the plan and apply that are due.

Example:
  kubectl conductor resume my-bucket -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runPause(cmd.Context(), o.streams.Out, cl, args[0], false)
		}),
	}
}

func newSyncCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "sync " + targetArg,
		Short: "Ask for a sync now, instead of at the next sync interval",
		Long: `Annotate the resource conductor.io/reconcile-requested-at=<now, RFC 3339>. The controller runs
it at once — a drift check when its spec was applied, else the plan and apply that are due — and
writes the value to status.lastHandledReconcileAt when that run starts. A paused resource, or a
plan that waits for approval, keeps the request until it can be answered.

Example:
  kubectl conductor sync my-bucket -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runSync(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

func newRotatePasswordsCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-passwords " + targetArg,
		Short: "Ask for new generated passwords (a class's generatedPasswords), applied at once",
		Long: `Annotate the resource conductor.io/rotate-passwords=<now, RFC 3339>. The controller makes each of
its generated passwords again with a new version, then plans and applies through the approval
rules: the module's write-only attribute gets the new password, and the connection Secret gets it
once the apply succeeds. A resource whose class generates no password is refused.

Example:
  kubectl conductor rotate-passwords my-database -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runRotatePasswords(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

// runRotatePasswords asks for new generated passwords of TARGET name and writes the request's
// value to out. Errors: those of resolve; a resource with no generated passwords; the patch failed.
func runRotatePasswords(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	if len(t.Resource.Spec.GeneratedPasswords) == 0 {
		return fmt.Errorf("%s has no generated passwords (spec.generatedPasswords): nothing to rotate", t)
	}
	at := cl.Now().UTC().Format(time.RFC3339Nano)
	if err := annotate(ctx, cl, t.Resource, v1alpha1.AnnotationRotatePasswords, at); err != nil {
		return err
	}
	fmt.Fprintf(out, "Requested new passwords for %s at %s: the event PasswordsRotated says when they are made; the next apply sends them.\n", t, at)
	return nil
}

// runPause pauses (pause) or resumes TARGET name and writes what it did to out. Errors: those of
// resolve; the patch failed.
func runPause(ctx context.Context, out io.Writer, cl *Clients, name string, pause bool) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	isPaused := t.Resource.Annotations[v1alpha1.AnnotationPaused] == "true"
	switch {
	case pause && isPaused:
		fmt.Fprintf(out, "%s is already paused.\n", t)
		return nil
	case pause:
		if err := annotate(ctx, cl, t.Resource, v1alpha1.AnnotationPaused, "true"); err != nil {
			return err
		}
		fmt.Fprintf(out, "Paused %s: no plan, apply or drift check starts until `kubectl conductor resume %s`.\n", t, t.Resource.Name)
		return nil
	case t.Resource.Annotations[v1alpha1.AnnotationPaused] == "":
		fmt.Fprintf(out, "%s is not paused.\n", t)
		return nil
	}
	if err := removeAnnotation(ctx, cl, t.Resource, v1alpha1.AnnotationPaused); err != nil {
		return err
	}
	fmt.Fprintf(out, "Resumed %s: the controller syncs it now.\n", t)
	return nil
}

// runSync asks for a sync of TARGET name now and writes the request's value to out. Errors: those
// of resolve; the patch failed.
func runSync(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	at := cl.Now().UTC().Format(time.RFC3339Nano)
	if err := annotate(ctx, cl, t.Resource, v1alpha1.AnnotationReconcileRequestedAt, at); err != nil {
		return err
	}
	fmt.Fprintf(out, "Requested a sync of %s at %s; status.lastHandledReconcileAt shows it once the run starts.\n", t, at)
	if t.Resource.Annotations[v1alpha1.AnnotationPaused] == "true" {
		fmt.Fprintf(out, "It is paused: the request waits for `kubectl conductor resume %s`.\n", t.Resource.Name)
	}
	return nil
}

// removeAnnotation removes one annotation of a resource with a JSON merge patch (null deletes).
// Errors: the API server's.
func removeAnnotation(ctx context.Context, cl *Clients, res *v1alpha1.InfraResource, key string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	if err != nil {
		return err
	}
	if err := cl.Client.Patch(ctx, res, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("removing annotation %s of InfraResource %s: %w", key, res.Name, err)
	}
	return nil
}
