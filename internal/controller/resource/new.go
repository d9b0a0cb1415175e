package resource

import (
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/event"
)

// New validates o and builds the Reconciler with every collaborator (parts.go) made now, once,
// defaults applied (DefaultSyncInterval, DefaultSecretCheckInterval, state.DefaultStaleLockAfter, one
// drift check at a time): nothing is built later, and no collaborator is nil. Where runs keep state
// is chosen here too (stateBackend): o.StateServer, or Terraform's kubernetes backend without one.
//
// Errors, each naming the field: Client or Recorder unset; with Runs set, Kube, APIReader or
// State.Namespace unset; StateServer set without Runs (a state server serves only runs).
func New(o Options) (*Reconciler, error) {
	var missing []error
	need := func(ok bool, field string) {
		if !ok {
			missing = append(missing, fmt.Errorf("resource.New: Options.%s is required", field))
		}
	}
	need(o.Client != nil, "Client")
	need(o.Recorder != nil, "Recorder")
	if o.Runs != nil {
		need(o.Kube != nil, "Kube (with Runs)")
		need(o.APIReader != nil, "APIReader (with Runs)")
		need(o.State.Namespace != "", "State.Namespace (with Runs)")
	} else if o.StateServer != nil {
		missing = append(missing, errors.New("resource.New: Options.StateServer is set without Runs: a state server serves only runs"))
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	r := &Reconciler{Client: o.Client, opts: o}
	if o.Shard != nil {
		r.shardEvents = make(chan event.GenericEvent, 1024)
	}
	r.built = r.newParts()
	return r, nil
}
