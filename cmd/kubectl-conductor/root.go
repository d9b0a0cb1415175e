package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// DefaultControllerNamespace is where the controller keeps state, plan and log Secrets unless
// --controller-namespace says otherwise.
const DefaultControllerNamespace = "conductor-system"

// DefaultStateKeySecret is the state encryption key Secret the manifests and the chart name
// (the controller's --state-encryption-secret).
const DefaultStateKeySecret = "conductor-tf-state-key"

// Clients is what every command works with: the clients, the namespaces and the clock. Commands
// take it and an io.Writer, so that they run the same from the cobra tree and from tests.
type Clients struct {
	// Client reads and patches conductor.io objects (and core objects: its scheme has both).
	Client client.Client
	// Kube reads Secrets and Leases (the state backend's functions take a clientset).
	Kube kubernetes.Interface
	// Namespace is where claims are looked up: -n, else the kubeconfig context's, else "default".
	Namespace string
	// ControllerNamespace holds the state, plan and log Secrets and the lock Leases.
	ControllerNamespace string
	// StateKeySecret names the state encryption key Secret in ControllerNamespace: what opens an
	// encrypted plan rendering.
	StateKeySecret string
	// Now is the clock ages are shown against.
	Now func() time.Time
}

// Scheme returns a scheme with the core Kubernetes kinds and conductor.io/v1alpha1.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// rootOptions are the flags shared by every command.
type rootOptions struct {
	streams             genericiooptions.IOStreams
	config              *genericclioptions.ConfigFlags
	controllerNamespace string
	stateKeySecret      string
	now                 func() time.Time
}

// clients builds Clients from the kubeconfig flags. Errors: an unusable kubeconfig, or a client
// that cannot be made from it.
func (o *rootOptions) clients() (*Clients, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a clientset: %w", err)
	}
	return &Clients{Client: c, Kube: kube, Namespace: ns, ControllerNamespace: o.controllerNamespace,
		StateKeySecret: o.stateKeySecret, Now: o.now}, nil
}

// run adapts a command function to cobra: it builds the clients, then calls fn with the
// command's output, the clients and the arguments.
func (o *rootOptions) run(fn func(cmd *cobra.Command, cl *Clients, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, err := o.clients()
		if err != nil {
			return err
		}
		return fn(cmd, cl, args)
	}
}

// NewRootCommand returns the `kubectl conductor` command tree writing to streams.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRootCommand(streams, time.Now)
}

// newRootCommand is NewRootCommand with a clock (tests fix it, so ages are stable).
func newRootCommand(streams genericiooptions.IOStreams, now func() time.Time) *cobra.Command {
	o := &rootOptions{
		streams: streams,
		config:  genericclioptions.NewConfigFlags(true).WithWarningPrinter(streams),
		now:     now,
	}
	root := &cobra.Command{
		Use:   "kubectl-conductor",
		Short: "Day-2 operations on conductor-tf resources: plans, approvals, runs, logs, locks, state history, pause and sync",
		Long: `kubectl conductor shows and acts on what the conductor-tf controller reports about
InfraResources: the plan that waits for approval, the last runs and their logs, the state's lock
and history, and the inputs and outputs of a class's module.

Commands that take TARGET accept an InfraResource name, or the name of an InfraClaim in the
namespace (-n, else the kubeconfig context's, else "default"); a claim stands for the resource it
is bound to. State, plan and log Secrets are read from --controller-namespace.

Example:
  kubectl conductor plan my-bucket -n team-a
  kubectl conductor approve my-bucket -n team-a --plan 3f2a9c1b0d4e
  kubectl conductor runs my-bucket -n team-a`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl conductor"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&o.controllerNamespace, "controller-namespace", DefaultControllerNamespace,
		"namespace of the controller's state, plan and log Secrets and lock Leases")
	root.PersistentFlags().StringVar(&o.stateKeySecret, "state-key-secret", DefaultStateKeySecret,
		"the state encryption key Secret in --controller-namespace (the controller's --state-encryption-secret): it opens encrypted plan renderings")
	root.AddCommand(newAdoptCommand(o), newPlanCommand(o), newApproveCommand(o), newCreatesCommand(o), newRunsCommand(o), newLogsCommand(o),
		newUnlockCommand(o), newRestoreStateCommand(o), newInputsCommand(o), newUpgradeCommand(o),
		newPauseCommand(o), newResumeCommand(o), newSyncCommand(o), newRotatePasswordsCommand(o), newTreeCommand(o))
	return root
}
