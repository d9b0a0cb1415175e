package runners

import (
	"context"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Router sends each run to where its spec says: Spec.RunnerPool "" to Local, the manager's
// in-process pool, any other to Remote's runners. It implements the controller's Runs. Questions
// about a key (Busy, ErroredState) are asked of both: a resource may move between pools.
type Router struct {
	Local  *tfrunner.Pool
	Remote *Dispatcher
}

func (r *Router) remote(spec tfrunner.Spec) bool { return spec.RunnerPool != "" && r.Remote != nil }

// Apply: see tfrunner.Pool.Apply and Dispatcher.Apply.
func (r *Router) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	if r.remote(spec) {
		return r.Remote.Apply(ctx, key, spec, opts)
	}
	return r.Local.Apply(ctx, key, spec, opts)
}

// Destroy: see tfrunner.Pool.Destroy and Dispatcher.Destroy.
func (r *Router) Destroy(ctx context.Context, key string, spec tfrunner.Spec) error {
	if r.remote(spec) {
		return r.Remote.Destroy(ctx, key, spec)
	}
	return r.Local.Destroy(ctx, key, spec)
}

// DriftCheck: see tfrunner.Pool.DriftCheck and Dispatcher.DriftCheck.
func (r *Router) DriftCheck(ctx context.Context, key string, spec tfrunner.Spec) (*tfrunner.StreamResult, error) {
	if r.remote(spec) {
		return r.Remote.DriftCheck(ctx, key, spec)
	}
	return r.Local.DriftCheck(ctx, key, spec)
}

// Forget drops key's in-process workspace (runners keep none).
func (r *Router) Forget(key string) { r.Local.Forget(key) }

// Busy reports a run of key waiting or running in either place.
func (r *Router) Busy(key string) bool {
	return r.Local.Busy(key) || (r.Remote != nil && r.Remote.Busy(key))
}

// ErroredState returns the state a run of key could not save, from either place.
func (r *Router) ErroredState(key string) ([]byte, bool) {
	if data, ok := r.Local.ErroredState(key); ok {
		return data, ok
	}
	if r.Remote != nil {
		return r.Remote.ErroredState(key)
	}
	return nil, false
}

// ClearErroredState forgets key's errored state in both places.
func (r *Router) ClearErroredState(key string) {
	r.Local.ClearErroredState(key)
	if r.Remote != nil {
		r.Remote.ClearErroredState(key)
	}
}
