package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

type createsOptions struct {
	approve, abandon bool
	importID         string
}

func newCreatesCommand(o *rootOptions) *cobra.Command {
	c := &createsOptions{}
	cmd := &cobra.Command{
		Use:   "creates " + targetArg + " [--approve | --import ADDRESS=ID | --abandon]",
		Short: "Show the creates a run that died left in doubt, and resolve them",
		Long: `Show status.createsPending of a resource: the addresses whose create a run that died had
started (it may or may not have happened), what the controller checked of each in its last run
(adopted, retried, or held, and why), and the plan that waits because of them. Then resolve them in
one command:

  --approve             the creates did not happen (or duplicates do not matter): apply the plan
                        that waits (reason InterruptedCreate), as kubectl conductor approve does
  --import ADDRESS=ID   the object exists, and this is its import ID: spec.import gets it, and the
                        next run imports it into state instead of creating it again; an ID that
                        names no object fails that import (ImportFailed) and creates nothing
  --abandon             the resource is being deleted: leave whatever those creates made as it is
                        (conductor.io/abandon=true) and let the reclaim go on

Example:
  kubectl conductor creates my-db -n team-a
  kubectl conductor creates my-db -n team-a --import aws_db_instance.this=team-a-my-db`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runCreates(cmd.Context(), o.streams.Out, cl, args[0], c)
		}),
	}
	cmd.Flags().BoolVar(&c.approve, "approve", false, "approve the plan held for the interrupted creates")
	cmd.Flags().StringVar(&c.importID, "import", "", "ADDRESS=ID: the import identity of an address in doubt (inside the module)")
	cmd.Flags().BoolVar(&c.abandon, "abandon", false, "on a resource being deleted: leave what the creates made, go on with the reclaim")
	cmd.MarkFlagsMutuallyExclusive("approve", "import", "abandon")
	return cmd
}

// runCreates shows the creates in doubt of TARGET name, or resolves them as c says. Errors: those
// of resolve; nothing in doubt (for a resolution); --approve with no plan held for them; --import
// not ADDRESS=ID or naming an address not in doubt; --abandon on a resource not being deleted;
// the patch failed.
func runCreates(ctx context.Context, out io.Writer, cl *Clients, name string, c *createsOptions) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	res := t.Resource
	pending := res.Status.CreatesPending
	resolving := c.approve || c.abandon || c.importID != ""
	if len(pending) == 0 {
		if resolving {
			return fmt.Errorf("%s: no create is in doubt; nothing to resolve", t)
		}
		fmt.Fprintf(out, "%s: no create is in doubt.\n", t)
		return nil
	}
	switch {
	case c.approve:
		if p := res.Status.PendingPlan; p == nil || p.Reason != v1alpha1.ReasonInterruptedCreate {
			return fmt.Errorf("%s: no plan waits because of the creates in doubt (the next run decides them); nothing approved", t)
		}
		return runApprove(ctx, out, cl, name, res.Status.PendingPlan.ID)
	case c.abandon:
		if res.DeletionTimestamp == nil {
			return fmt.Errorf("%s is not being deleted: --abandon leaves objects behind on reclaim only; "+
				"use --approve (create again) or --import ADDRESS=ID (adopt)", t)
		}
		if err := annotate(ctx, cl, res, v1alpha1.AnnotationAbandon, "true"); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s=true; the reclaim goes on and leaves what the creates of %s made as it is.\n",
			t, v1alpha1.AnnotationAbandon, strings.Join(pending, ", "))
		return nil
	case c.importID != "":
		return importIdentity(ctx, out, cl, t, c.importID)
	}
	showCreates(out, t, cl)
	return nil
}

// showCreates writes the creates in doubt, the last run's decisions and the plan that waits.
func showCreates(out io.Writer, t target, cl *Clients) {
	res := t.Resource
	fmt.Fprintf(out, "%s: a run that died had started creating, and may have created:\n", t)
	for _, a := range res.Status.CreatesPending {
		if a == v1alpha1.CreatesUnrecorded {
			fmt.Fprintf(out, "  %s  any create outside the state: the run died during its apply before it could record which it had started (the plan that waits names them)\n", a)
			continue
		}
		id := res.Spec.ImportIdentities[strings.TrimPrefix(a, "module.main.")]
		fmt.Fprintf(out, "  %s  import identity: %s\n", a, orDash(id))
	}
	fmt.Fprintf(out, "Left by run %s; interruptedCreates: %s\n", short(res.Status.CreatesPendingRun, 8), orDash(string(res.Spec.InterruptedCreates)))
	if lr := res.Status.LastRun; lr != nil && len(lr.Resolutions) > 0 {
		fmt.Fprintf(out, "Checked by run %s (%s):\n", short(lr.ID, 8), ago(cl.Now(), lr.StartTime))
		for _, r := range lr.Resolutions {
			fmt.Fprintf(out, "  %-8s %s: %s\n", r.Decision, r.Address, r.Reason)
		}
	}
	if p := res.Status.PendingPlan; p != nil && p.Reason == v1alpha1.ReasonInterruptedCreate {
		fmt.Fprintf(out, "Plan %s waits (%s): kubectl conductor plan %s\n", p.ID, summary(p.Summary), res.Name)
	}
	fmt.Fprintf(out, "Resolve: --approve (create again), --import ADDRESS=ID (adopt the object), --abandon (when deleting)\n")
}

// importIdentity adds ADDRESS with ID to spec.import (replacing an entry of that address) for an
// address in doubt: the next run imports it before it plans, under any interruptedCreates policy,
// and an import of an object the provider does not find fails the run (ImportFailed) rather than
// reading as "never created" — a mistyped ID holds, it is never taken as leave to create again.
// Errors: not ADDRESS=ID, an address not in doubt, or the update failed (a conflict included:
// run the command again).
func importIdentity(ctx context.Context, out io.Writer, cl *Clients, t target, arg string) error {
	res := t.Resource
	addr, id, ok := strings.Cut(arg, "=")
	addr = strings.TrimPrefix(strings.TrimSpace(addr), "module.main.")
	id = strings.TrimSpace(id)
	if !ok || addr == "" || id == "" {
		return fmt.Errorf("--import takes ADDRESS=ID (an address inside the module), not %q", arg)
	}
	inDoubt := false
	for _, a := range res.Status.CreatesPending {
		// Under the unrecorded-creates mark, any address may be what the dead run created.
		inDoubt = inDoubt || a == v1alpha1.CreatesUnrecorded || strings.TrimPrefix(a, "module.main.") == addr
	}
	if !inDoubt {
		return fmt.Errorf("%s: %s is not in doubt (in doubt: %s)", t, addr, strings.Join(res.Status.CreatesPending, ", "))
	}
	updated := res.DeepCopy()
	updated.Spec.Import = slices.DeleteFunc(updated.Spec.Import, func(i v1alpha1.ImportTarget) bool {
		return strings.TrimPrefix(i.Address, "module.main.") == addr
	})
	updated.Spec.Import = append(updated.Spec.Import, v1alpha1.ImportTarget{Address: addr, ID: id})
	if err := cl.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("adding %s=%s to spec.import of InfraResource %s: %w", addr, id, res.Name, err)
	}
	fmt.Fprintf(out, "%s: %s added to spec.import with ID %s; the next run imports it before it plans. "+
		"An ID that names no object fails that import (ImportFailed) and nothing is created: fix it with --import again.\n", t, addr, id)
	return nil
}
