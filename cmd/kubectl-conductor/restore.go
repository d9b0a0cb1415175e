package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

type restoreOptions struct{ serial int64 }

func newRestoreStateCommand(o *rootOptions) *cobra.Command {
	r := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore-state " + targetArg + " [--serial N]",
		Short: "List a resource's earlier states, or ask the controller to restore one",
		Long: `Without --serial, list the earlier versions of a resource's Terraform state that the controller
keeps (SERIAL, LINEAGE, REPLACED AT) and the current serial.

With --serial N, check that version N is in that history (and of the current state's lineage),
then annotate the resource conductor.io/restore-state-serial=N. Before its next run the controller
makes that version the current state again, with the next serial (Terraform refuses serials that go
backwards); the state it replaces is kept in the history, so a restore can be undone the same way.

Example:
  kubectl conductor restore-state my-bucket -n team-a
  kubectl conductor restore-state my-bucket -n team-a --serial 7`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runRestoreState(cmd.Context(), o.streams.Out, cl, args[0], r.serial, cmd.Flags().Changed("serial"))
		}),
	}
	cmd.Flags().Int64Var(&r.serial, "serial", 0, "the serial of the version to restore, from the history this command lists")
	return cmd
}

// runRestoreState lists the state history of TARGET name to out (set false), or, with set,
// requests the restore of the version with this serial and writes what it requested. Errors: those
// of resolve; the history cannot be read; serial is not in the history (the kept serials named);
// the version is of another lineage; the patch failed.
func runRestoreState(ctx context.Context, out io.Writer, cl *Clients, name string, serial int64, set bool) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	res := t.Resource
	suffix := stateSuffix(res)
	versions, err := statebackend.NewStore(cl.Kube, cl.ControllerNamespace).For(suffix).History(ctx)
	if err != nil {
		return fmt.Errorf("%s: reading the state's history in %s: %w", t, cl.ControllerNamespace, err)
	}
	st := res.Status.State
	if !set {
		return listHistory(out, cl, t, suffix, versions)
	}
	var found *statebackend.Version
	kept := make([]string, 0, len(versions))
	for i := range versions {
		kept = append(kept, strconv.FormatInt(versions[i].Serial, 10))
		if versions[i].Serial == serial {
			found = &versions[i]
		}
	}
	if found == nil {
		have := "no earlier versions are kept"
		if len(kept) > 0 {
			have = "kept serials: " + strings.Join(kept, ", ")
		}
		return fmt.Errorf("%s: serial %d is not in the state's history (%s); nothing requested", t, serial, have)
	}
	if st != nil && st.Lineage != "" && found.Lineage != "" && found.Lineage != st.Lineage {
		return fmt.Errorf("%s: version %d has lineage %s, the current state lineage %s: it is another state; nothing requested",
			t, serial, found.Lineage, st.Lineage)
	}
	value := strconv.FormatInt(serial, 10)
	if prev, ok := res.Annotations[v1alpha1.AnnotationRestoreState]; ok && prev != value {
		fmt.Fprintf(out, "Replacing the pending request to restore serial %s.\n", prev)
	}
	if err := annotate(ctx, cl, res, v1alpha1.AnnotationRestoreState, value); err != nil {
		return err
	}
	next := "its own serial (there is no current state)"
	if st != nil && st.Serial > 0 {
		next = fmt.Sprintf("serial %d", st.Serial+1)
	}
	fmt.Fprintf(out, "Asked the controller to restore serial %d of the state of %s (lineage %s, replaced %s).\n",
		serial, t, orDash(found.Lineage), stamp(cl.Now(), timeOf(found)))
	fmt.Fprintf(out, "Before its next run it becomes the current state, with %s; the state it replaces stays in the history.\n", next)
	return nil
}

// listHistory writes the current state and the table of kept versions (newest first).
func listHistory(out io.Writer, cl *Clients, t target, suffix string, versions []statebackend.Version) error {
	now := cl.Now()
	secret := cl.ControllerNamespace + "/" + statebackend.SecretName(statebackend.DefaultWorkspace, suffix)
	if st := t.Resource.Status.State; st != nil {
		fmt.Fprintf(out, "State of %s: Secret %s, current serial %d, lineage %s.\n", t, secret, st.Serial, orDash(st.Lineage))
	} else {
		fmt.Fprintf(out, "State of %s: Secret %s; the controller reports no state yet.\n", t, secret)
	}
	if len(versions) == 0 {
		fmt.Fprintln(out, "No earlier versions are kept.")
		return nil
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "SERIAL\tLINEAGE\tREPLACED AT")
	for i := range versions {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", versions[i].Serial, orDash(versions[i].Lineage), stamp(now, timeOf(&versions[i])))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nRestore one with: kubectl conductor restore-state %s --serial N\n", t.Resource.Name)
	return nil
}

// timeOf is when a version was replaced, nil when unknown.
func timeOf(v *statebackend.Version) *metav1.Time {
	if v.Time.IsZero() {
		return nil
	}
	m := metav1.NewTime(v.Time)
	return &m
}
