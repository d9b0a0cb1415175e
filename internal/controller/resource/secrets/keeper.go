// Package secrets reads what a resource's runs take from Secrets and the API server (variablesFrom,
// env, module credentials, generated passwords, a ServiceAccount token for Kubernetes access or
// workload identity) and writes the Secrets a resource shows people (the connection Secret, the
// waiting plan's rendering, the run log, the password Secret), each labelled with the resource.
//
// It is one part of the resource reconciler (internal/controller/resource): it decides no run and
// writes no status other than the fields a write records (status.connectionSecret,
// status.lastRun.logSecret). Secret values are read from the API server, never from the cache, and
// never reach a spec, status, event or log.
package secrets

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are what a Keeper uses; New copies them.
type Options struct {
	// Client writes Secrets and reads claims, runner pools and connection Secrets (cached).
	Client client.Client
	// Reader reads Secret inputs and the password Secret from the API server (Secrets are not
	// cached).
	Reader client.Reader
	// Kube requests ServiceAccount tokens (TokenRequest API).
	Kube kubernetes.Interface
	// Recorder says what a write did (ConnectionSecretWritten, PasswordsRotated).
	Recorder events.EventRecorder
	// Namespace is the controller's: plan, log and password Secrets live there, and the
	// ServiceAccounts runs are granted.
	Namespace string
	// RunCluster is the API server a run's granted kubeconfig points at.
	RunCluster RunCluster
	// ControllerAccount is the controller's own ServiceAccount, which no run gets a token of.
	ControllerAccount string
	// KeepRunLogs keeps every run's log (--keep-run-logs), not only failed runs' and drift found.
	KeepRunLogs bool
}

// Keeper reads a run's Secret inputs and credentials and writes the Secrets a resource shows
// people. It holds no per-resource state: every method takes the resource it works on.
type Keeper struct {
	api               client.Client
	reader            client.Reader
	clientset         kubernetes.Interface
	recorder          events.EventRecorder
	namespace         string
	runCluster        RunCluster
	controllerAccount string
	keepRunLogs       bool
}

// New returns the Keeper of o. It checks nothing: the resource reconciler's New validates its
// options, which these come from.
func New(o Options) *Keeper {
	return &Keeper{api: o.Client, reader: o.Reader, clientset: o.Kube, recorder: o.Recorder, namespace: o.Namespace,
		runCluster: o.RunCluster, controllerAccount: o.ControllerAccount, keepRunLogs: o.KeepRunLogs}
}
