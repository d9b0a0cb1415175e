package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func newInputsCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "inputs CLASS",
		Short: "List the input variables and outputs of a class's module",
		Long: `List what the controller read from an InfraClass's module (status.inputs and status.outputs):
each input variable with its type, whether it is required (has no default) and its description,
then each output, whether it is sensitive (sensitive outputs reach only the claim's connection
Secret) and its description.

Example:
  kubectl conductor inputs minio-bucket`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runInputs(cmd.Context(), o.streams.Out, cl, args[0])
		}),
	}
}

// runInputs writes the tables of InfraClass name's module inputs and outputs to out. Errors: the
// class does not exist or cannot be read.
func runInputs(ctx context.Context, out io.Writer, cl *Clients, name string) error {
	class := &v1alpha1.InfraClass{}
	if err := cl.Client.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no InfraClass %q", name)
		}
		return fmt.Errorf("reading InfraClass %s: %w", name, err)
	}
	st := class.Status
	fmt.Fprintf(out, "InfraClass %s: module %s version %s\n", class.Name, class.Spec.Module.Source, class.Spec.Module.Version)
	if len(st.Inputs) == 0 && len(st.Outputs) == 0 {
		fmt.Fprintln(out, "The controller has not read the module's inputs and outputs (yet).")
		for _, c := range st.Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Status != "True" {
				fmt.Fprintf(out, "Ready is %s (%s): %s\n", c.Status, c.Reason, c.Message)
			}
		}
		return nil
	}
	fmt.Fprintln(out, "\nInputs:")
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tREQUIRED\tDESCRIPTION")
	for _, in := range st.Inputs {
		typ := orDash(in.Type)
		if in.Sensitive {
			typ += " (sensitive)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\n", in.Name, typ, in.Required, oneLine(in.Description))
	}
	if len(st.Inputs) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nOutputs:")
	tw = tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSENSITIVE\tDESCRIPTION")
	for _, o := range st.Outputs {
		fmt.Fprintf(tw, "%s\t%t\t%s\n", o.Name, o.Sensitive, oneLine(o.Description))
	}
	if len(st.Outputs) == 0 {
		fmt.Fprintln(tw, "(none)\t\t")
	}
	return tw.Flush()
}

// oneLine joins a description's lines with spaces, so that it stays in its table cell; "-" when
// it is empty.
func oneLine(s string) string {
	return orDash(strings.Join(strings.Fields(s), " "))
}
