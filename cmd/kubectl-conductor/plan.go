package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// planTextKey is the key of Terraform's rendering in a plan Secret.
const planTextKey = "plan.txt"

func newPlanCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "plan " + targetArg,
		Short: "Show the plan that waits for approval, with Terraform's rendering of it",
		Long: `Show status.pendingPlan of a resource: its id, why it waits (Manual approval, a destructive
change, an imported object replaced), the generation it was made for, when, the summary
(+add ~change -destroy) and its changes, then Terraform's own rendering of the plan, read from the
plan Secret in the controller namespace (key plan.txt; sensitive values redacted by Terraform).
When no plan waits it says so (exit 0) and names the last run's plan.

Example:
  kubectl conductor plan my-bucket -n team-a
  kubectl conductor plan ires-0f3c2a --controller-namespace conductor-system`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runPlan(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

// runPlan writes the pending plan of TARGET name to out, or "no plan waits for approval" and the
// last run's plan id. A plan Secret that cannot be read is reported in out, not as an error.
// Errors: those of resolve.
func runPlan(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	now := cl.Now()
	res := t.Resource
	p := res.Status.PendingPlan
	if p == nil {
		fmt.Fprintf(out, "%s: no plan waits for approval.\n", t)
		if lr := res.Status.LastRun; lr != nil {
			fmt.Fprintf(out, "Last run: %s %s %s, run %s, plan %s\n", lr.Operation, orDash(string(lr.Result)),
				ago(now, lr.StartTime), short(lr.ID, 8), orDash(lr.PlanID))
		}
		return nil
	}
	denied := p.Reason == v1alpha1.ReasonPolicyDenied
	if denied {
		fmt.Fprintf(out, "%s: the class's policy refused the plan; no approval applies it.\n", t)
	} else {
		fmt.Fprintf(out, "%s: a plan waits for approval.\n", t)
	}
	fmt.Fprintf(out, "Plan:        %s\n", p.ID)
	fmt.Fprintf(out, "Reason:      %s\n", p.Reason)
	if p.Rule != "" {
		fmt.Fprintf(out, "Rule:        %s\n", p.Rule)
	}
	if p.Message != "" {
		fmt.Fprintf(out, "Message:     %s\n", p.Message)
	}
	gen := fmt.Sprintf("%d", p.Generation)
	if p.Generation != res.Generation {
		gen += fmt.Sprintf(" (the spec is now at generation %d: a newer plan will replace this one)", res.Generation)
	}
	fmt.Fprintf(out, "Generation:  %s\n", gen)
	fmt.Fprintf(out, "Created:     %s\n", stamp(now, &p.CreatedAt))
	fmt.Fprintf(out, "Summary:     %s\n", summary(p.Summary))
	fmt.Fprintln(out, "Changes:")
	if len(p.Changes) == 0 {
		fmt.Fprintln(out, "  (none listed)")
	}
	for _, c := range p.Changes {
		fmt.Fprintf(out, "  %s\n", c)
	}
	fmt.Fprintln(out)
	if p.Secret == "" {
		fmt.Fprintln(out, "(the controller kept no rendering of this plan)")
	} else {
		s := &corev1.Secret{}
		key := types.NamespacedName{Namespace: cl.ControllerNamespace, Name: p.Secret}
		if err := cl.Client.Get(ctx, key, s); err != nil {
			fmt.Fprintf(out, "(Terraform's rendering is unavailable: Secret %s: %v)\n", key, err)
		} else {
			fmt.Fprintf(out, "Terraform's plan (Secret %s, key %s):\n", key, planTextKey)
			text, err := openRendering(ctx, cl, s.Data[planTextKey])
			if err != nil {
				fmt.Fprintf(out, "(the rendering is encrypted and could not be opened: %v)\n", err)
			}
			fmt.Fprint(out, text)
			if len(text) > 0 && text[len(text)-1] != '\n' {
				fmt.Fprintln(out)
			}
		}
	}
	if denied {
		fmt.Fprintln(out, "\nChange the claim (or the resource's spec) so that its plan passes the rule; a change of the class's policy plans again too.")
		return nil
	}
	fmt.Fprintf(out, "\nApprove it with: kubectl conductor approve %s --plan %s\n", res.Name, p.ID)
	return nil
}

type approveOptions struct{ plan string }

func newApproveCommand(o *rootOptions) *cobra.Command {
	a := &approveOptions{}
	cmd := &cobra.Command{
		Use:   "approve " + targetArg + " [--plan ID]",
		Short: "Approve the plan that waits for approval",
		Long: `Annotate the resource conductor.io/approve-plan=<id of status.pendingPlan>; the controller
then applies that plan, and only that plan: a newer plan discards the approval.

It refuses when no plan waits, and, with --plan, when the plan that waits is not the one named:
the plan changed since it was reviewed. Pass the id that ` + "`kubectl conductor plan`" + ` showed,
so that what is approved is what was read.

Example:
  kubectl conductor plan my-bucket -n team-a
  kubectl conductor approve my-bucket -n team-a --plan 3f2a9c1b0d4e`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runApprove(cmd.Context(), o.streams.Out, cl, args[0], a.plan)
		}),
	}
	cmd.Flags().StringVar(&a.plan, "plan", "", "the plan id to approve; refused when the plan that waits has another id")
	return cmd
}

// runApprove approves the pending plan of TARGET name (with planID, only when it is that plan) and
// writes what it approved to out. Errors: those of resolve; no plan waits; planID differs from
// the pending plan's id (both ids named); the patch failed.
func runApprove(ctx context.Context, out io.Writer, cl *Clients, name, planID string) error {
	t, err := resolve(ctx, cl, name)
	if err != nil {
		return err
	}
	res := t.Resource
	p := res.Status.PendingPlan
	if p == nil {
		return fmt.Errorf("%s: no plan waits for approval; nothing to approve", t)
	}
	if p.Reason == v1alpha1.ReasonPolicyDenied {
		return fmt.Errorf("%s: plan %s was refused by the class's policy (%s): no approval applies it; nothing approved", t, p.ID, p.Message)
	}
	if planID != "" && planID != p.ID {
		return fmt.Errorf("%s: the plan that waits for approval is %s, not %s: the plan changed since it was "+
			"reviewed; nothing approved. Review it with `kubectl conductor plan %s`", t, p.ID, planID, res.Name)
	}
	if res.Annotations[v1alpha1.AnnotationApprovePlan] == p.ID {
		fmt.Fprintf(out, "Plan %s of %s is already approved (%s); the controller applies it.\n", p.ID, t, summary(p.Summary))
		return nil
	}
	if err := annotate(ctx, cl, res, v1alpha1.AnnotationApprovePlan, p.ID); err != nil {
		return err
	}
	fmt.Fprintf(out, "Approved plan %s of %s: %s, waiting because %s, made for generation %d.\n",
		p.ID, t, summary(p.Summary), p.Reason, p.Generation)
	fmt.Fprintf(out, "The controller applies it on its next reconcile; a newer plan would discard this approval.\n")
	return nil
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// openRendering is a plan rendering as the controller stored it: as it is when states are not
// encrypted, else opened with the state key Secret (cl.StateKeySecret in the controller's
// namespace; reading it needs what reading state Secrets needs). Errors: reading the key Secret,
// or a rendering no passphrase of it opens.
func openRendering(ctx context.Context, cl *Clients, data []byte) (string, error) {
	if !statebackend.IsEncrypted(data) {
		return string(data), nil
	}
	s, err := cl.Kube.CoreV1().Secrets(cl.ControllerNamespace).Get(ctx, cl.StateKeySecret, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the state key Secret %s/%s: %w", cl.ControllerNamespace, cl.StateKeySecret, err)
	}
	keys, err := statebackend.NewKeyring(string(s.Data[statebackend.KeyPassphrase]), string(s.Data[statebackend.KeyPreviousPassphrase]))
	if err != nil {
		return "", fmt.Errorf("the state key Secret %s/%s: %w", cl.ControllerNamespace, cl.StateKeySecret, err)
	}
	plain, err := keys.Open(data)
	return string(plain), err
}
