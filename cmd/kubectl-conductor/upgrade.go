package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

type upgradeOptions struct {
	class, to string
	dryRun    bool
	wait      time.Duration
}

func newUpgradeCommand(o *rootOptions) *cobra.Command {
	u := &upgradeOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade " + targetArg + " | --class NAME",
		Short: "Move resources to the newer module version their class offers, and show the plan",
		Long: `Set spec.module.version of a resource to status.availableModuleVersion (the newer version its
class offers; condition UpgradeAvailable), or to --to VERSION; with --class, of every resource of
that class that has an upgrade available. The controller then plans with the new version, and the
plan goes through the class's approval gate and destructive-change guard like any other change; a
failed upgrade leaves the resource on its old version (status.moduleVersion) with the reason.

--dry-run lists what would move, from which version to which, and changes nothing. --wait waits
until each upgraded resource's plan was made and shows it: the plan that waits for approval (see
` + "`kubectl conductor approve`" + `), or what the apply did.

Example:
  kubectl conductor upgrade my-bucket -n team-a --dry-run
  kubectl conductor upgrade my-bucket -n team-a --wait 5m
  kubectl conductor upgrade --class minio-bucket`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (u.class == "") == (len(args) == 0) || len(args) > 1 {
				return fmt.Errorf("name one resource or claim, or --class NAME")
			}
			if u.class != "" && u.to != "" {
				return fmt.Errorf("--to applies to one resource; a class's resources move to the class's version")
			}
			return nil
		},
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runUpgrade(cmd.Context(), o.streams.Out, cl, name, *u)
		}),
	}
	cmd.Flags().StringVar(&u.class, "class", "", "upgrade every resource of this InfraClass that has an upgrade available")
	cmd.Flags().StringVar(&u.to, "to", "", "the version to move one resource to (default: status.availableModuleVersion)")
	cmd.Flags().BoolVar(&u.dryRun, "dry-run", false, "list what would move and change nothing")
	cmd.Flags().DurationVar(&u.wait, "wait", 0, "wait this long for each upgraded resource's plan and show it (0: do not wait)")
	return cmd
}

// upgrade is one resource's move from one module version to another.
type upgrade struct {
	res      *v1alpha1.InfraResource
	from, to string
}

// runUpgrade moves the resource TARGET name (or, with opts.class, the class's resources that have
// an upgrade available) to the newer module version and writes what it did to out. Errors: those
// of resolve; a named resource with nothing to upgrade to; reading or patching resources; with
// opts.wait, a resource whose plan was not made in time.
func runUpgrade(ctx context.Context, out io.Writer, cl *Clients, name string, opts upgradeOptions) error {
	moves, err := upgrades(ctx, cl, name, opts)
	if err != nil {
		return err
	}
	if len(moves) == 0 {
		fmt.Fprintf(out, "No resource of InfraClass %s has an upgrade available.\n", opts.class)
		return nil
	}
	verb := "Upgrading"
	if opts.dryRun {
		verb = "Would upgrade (dry run, nothing changed)"
	}
	fmt.Fprintf(out, "%s:\n", verb)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RESOURCE\tCLAIM\tFROM\tTO")
	for _, m := range moves {
		claim := "-"
		if ref := m.res.Spec.ClaimRef; ref != nil {
			claim = ref.Namespace + "/" + ref.Name
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.res.Name, claim, m.from, m.to)
	}
	_ = w.Flush()
	if opts.dryRun {
		return nil
	}
	for _, m := range moves {
		base := m.res.DeepCopy()
		m.res.Spec.Module.Version = m.to
		// A merge patch of the one field: the controller's status writes in between do not conflict.
		if err := cl.Client.Patch(ctx, m.res, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("setting spec.module.version of InfraResource %s to %s: %w", m.res.Name, m.to, err)
		}
	}
	if opts.wait <= 0 {
		fmt.Fprintf(out, "The controller plans each upgrade; `kubectl conductor plan RESOURCE` shows a plan that waits for approval.\n")
		return nil
	}
	for _, m := range moves {
		if err := awaitUpgrade(ctx, out, cl, m, opts.wait); err != nil {
			return err
		}
	}
	return nil
}

// upgrades lists the moves runUpgrade makes: one for a named resource (to opts.to, else its
// available version), or one per resource of opts.class with an available version, by name.
func upgrades(ctx context.Context, cl *Clients, name string, opts upgradeOptions) ([]upgrade, error) {
	if opts.class == "" {
		t, err := resolve(ctx, cl, name)
		if err != nil {
			return nil, err
		}
		to := opts.to
		if to == "" {
			to = t.Resource.Status.AvailableModuleVersion
		}
		from := t.Resource.Spec.Module.Version
		if to == "" {
			return nil, fmt.Errorf("%s is on %s and its class offers no newer version (condition UpgradeAvailable); pass --to VERSION to move it anyway", t, from)
		}
		if to == from {
			return nil, fmt.Errorf("%s is already at module version %s", t, to)
		}
		return []upgrade{{res: t.Resource, from: from, to: to}}, nil
	}
	list := &v1alpha1.InfraResourceList{}
	if err := cl.Client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing InfraResources: %w", err)
	}
	var moves []upgrade
	for i := range list.Items {
		res := &list.Items[i]
		if res.Spec.ClassRef == nil || res.Spec.ClassRef.Name != opts.class || res.Status.AvailableModuleVersion == "" {
			continue
		}
		moves = append(moves, upgrade{res: res, from: res.Spec.Module.Version, to: res.Status.AvailableModuleVersion})
	}
	sort.Slice(moves, func(i, j int) bool { return moves[i].res.Name < moves[j].res.Name })
	return moves, nil
}

// awaitUpgrade polls m's resource every second, up to timeout, until the controller made the plan
// for the new generation, and shows it: the plan waiting for approval, the apply's summary, or
// the failure (the resource stays on its old version).
func awaitUpgrade(ctx context.Context, out io.Writer, cl *Clients, m upgrade, timeout time.Duration) error {
	gen := m.res.Generation
	res := &v1alpha1.InfraResource{}
	done := ""
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Client.Get(ctx, types.NamespacedName{Name: m.res.Name}, res); err != nil {
			return false, err
		}
		lr := res.Status.LastRun
		switch {
		case res.Status.PendingPlan != nil && res.Status.PendingPlan.Generation >= gen:
			done = "plan"
		case res.Status.ObservedGeneration >= gen && res.Status.ModuleVersion != "":
			done = "applied"
		case lr != nil && lr.Generation >= gen && lr.Result == v1alpha1.RunFailed:
			done = "failed"
		}
		return done != "", nil
	})
	if err != nil {
		return fmt.Errorf("InfraResource %s: no plan for module version %s within %s: %w", m.res.Name, m.to, timeout, err)
	}
	fmt.Fprintln(out)
	switch done {
	case "plan":
		return runPlan(ctx, out, cl, m.res.Name)
	case "applied":
		s := "no changes"
		if lr := res.Status.LastRun; lr != nil && lr.Summary != nil {
			s = summary(*lr.Summary)
		}
		fmt.Fprintf(out, "InfraResource %s: applied module version %s (%s).\n", res.Name, res.Status.ModuleVersion, s)
	default:
		fmt.Fprintf(out, "InfraResource %s: the upgrade to %s failed and the resource stays on %s: %s\n",
			res.Name, m.to, orDash(res.Status.ModuleVersion), res.Status.LastRun.Message)
	}
	return nil
}
