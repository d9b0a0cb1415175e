package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// logKey is the key of a run's log in its log Secret.
const logKey = "log"

func newRunsCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "runs " + targetArg,
		Short: "List the last Terraform runs of a resource",
		Long: `List status.runs of a resource, newest first: the run id (first 8 characters), the operation
(init, plan, apply, destroy, import), its result, when it started, how long it took, the changes
of its plan (+add ~change -destroy), the plan id and the controller pod that ran it. Below the
table, the message of the newest failed run.

Example:
  kubectl conductor runs my-bucket -n team-a
  kubectl conductor logs my-bucket -n team-a`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runRuns(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

// runs returns a resource's runs newest first by start time: status.lastRun and status.runs
// (v1alpha1's RunHistory, each run once).
func runs(res *v1alpha1.InfraResource) []v1alpha1.RunStatus {
	out := res.Status.RunHistory()
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].StartTime, out[j].StartTime
		return a != nil && b != nil && b.Before(a)
	})
	return out
}

// runRuns writes the table of TARGET name's runs to out, then the newest failed run's message.
// Errors: those of resolve.
func runRuns(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	list := runs(t.Resource)
	if len(list) == 0 {
		fmt.Fprintf(out, "%s: no runs recorded.\n", t)
		return nil
	}
	now := cl.Now()
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "RUN\tOPERATION\tRESULT\tSTARTED\tWAITED\tDURATION\tCHANGES\tPLAN\tCONTROLLER")
	for _, r := range list {
		// WAITED: its wait for a runner slot (queuedTime → startTime); DURATION: the run itself.
		waited := "-"
		if r.QueuedTime != nil && r.StartTime != nil && r.StartTime.After(r.QueuedTime.Time) {
			waited = duration.HumanDuration(r.StartTime.Sub(r.QueuedTime.Time))
		}
		took := "-"
		switch {
		case r.StartTime != nil && r.CompletionTime != nil:
			took = duration.HumanDuration(r.CompletionTime.Sub(r.StartTime.Time))
		case r.StartTime != nil && r.Result == v1alpha1.RunRunning:
			took = "running"
		}
		changes := "-"
		if r.Summary != nil {
			changes = summary(*r.Summary)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short(r.ID, 8), orDash(r.Operation), orDash(string(r.Result)),
			ago(now, r.StartTime), waited, took, changes, orDash(r.PlanID), orDash(r.Controller))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range list {
		if r.Result != v1alpha1.RunFailed {
			continue
		}
		fmt.Fprintf(out, "\nRun %s (%s, %s) failed:\n", short(r.ID, 8), r.Operation, ago(now, r.StartTime))
		msg := strings.TrimSpace(r.Message)
		if msg == "" {
			msg = "(no message recorded)"
		}
		fmt.Fprintln(out, "  "+strings.ReplaceAll(msg, "\n", "\n  "))
		break
	}
	return nil
}

type logsOptions struct{ run string }

func newLogsCommand(o *rootOptions) *cobra.Command {
	l := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs " + targetArg + " [--run ID]",
		Short: "Print the log of the last Terraform run of a resource",
		Long: `Print Terraform's output of the last run of a resource (status.lastRun.logSecret, key log, in
the controller namespace; sensitive values redacted by Terraform). With --run, the log of the run
whose id starts with that prefix, among status.runs (the RUN column of ` + "`kubectl conductor runs`" + `).

Example:
  kubectl conductor logs my-bucket -n team-a
  kubectl conductor logs my-bucket -n team-a --run 7c1e90ab`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runLogs(cmd.Context(), o.streams.Out, cl, args[0], l.run)
		}),
	}
	cmd.Flags().StringVar(&l.run, "run", "", "a run id, or a prefix of one, from `kubectl conductor runs`")
	return cmd
}

// runLogs writes the log of TARGET name's last run (or of the run whose id starts with runID) to
// out, or a message saying why there is none (no run, no log kept). Errors: those of resolve; no
// run with that id; the log Secret is gone or unreadable.
func runLogs(ctx context.Context, out io.Writer, cl *Clients, name, runID string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	run := t.Resource.Status.LastRun
	if runID != "" {
		run = nil
		for _, r := range runs(t.Resource) {
			if r.ID != "" && strings.HasPrefix(r.ID, runID) {
				run = &r
				break
			}
		}
		if run == nil {
			return fmt.Errorf("%s: no run with id %s among its last runs (see `kubectl conductor runs %s`)", t, runID, t.Resource.Name)
		}
	}
	if run == nil {
		fmt.Fprintf(out, "%s: no run yet, so no log.\n", t)
		return nil
	}
	if run.LogSecret == "" {
		fmt.Fprintf(out, "%s: run %s (%s %s) kept no log.\n", t, short(run.ID, 8), run.Operation, orDash(string(run.Result)))
		return nil
	}
	key := types.NamespacedName{Namespace: cl.ControllerNamespace, Name: run.LogSecret}
	s := &corev1.Secret{}
	if err := cl.Client.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: the log of run %s (Secret %s) is gone", t, short(run.ID, 8), key)
		}
		return fmt.Errorf("%s: reading the log of run %s (Secret %s): %w", t, short(run.ID, 8), key, err)
	}
	log := s.Data[logKey]
	if len(log) == 0 {
		fmt.Fprintf(out, "%s: the log of run %s (Secret %s) is empty.\n", t, short(run.ID, 8), key)
		return nil
	}
	if _, err := out.Write(log); err != nil {
		return err
	}
	if log[len(log)-1] != '\n' {
		fmt.Fprintln(out)
	}
	return nil
}
