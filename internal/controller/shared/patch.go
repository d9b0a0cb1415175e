package shared

import (
	"context"
	"encoding/json"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StatusWriteTimeout bounds the status write at the end of a reconcile; it is made with a context
// that a shutdown does not cancel, so that a reconcile's outcome is not lost to SIGTERM.
const StatusWriteTimeout = 10 * time.Second

// PatchStatus is how every reconciler here writes status, once, at the end of a reconcile (as
// cluster-api's patch helper): the status fields that changed since before, as a JSON merge patch
// without a resourceVersion (other writers of the object — a person's annotation, the claim
// controller binding a resource — must not make the write fail), and nothing at all when nothing
// changed. It reports whether it wrote; the API server's error as it is (callers ignore NotFound
// where an object deleted meanwhile is no matter).
//
// Objects of this API (WithConditions) get their kstatus conditions first (SetHealthConditions).
func PatchStatus(ctx context.Context, c client.Client, obj, before client.Object) (bool, error) {
	return patchStatus(ctx, c, obj, client.MergeFrom(before))
}

// PatchStatusLocked is PatchStatus with before's resourceVersion in the patch (controller-runtime's
// MergeFromWithOptimisticLock): the API server refuses it with a conflict (HTTP 409) when the object
// changed since before was read. For a writer that must never overwrite a newer status.
func PatchStatusLocked(ctx context.Context, c client.Client, obj, before client.Object) (bool, error) {
	return patchStatus(ctx, c, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

func patchStatus(ctx context.Context, c client.Client, obj client.Object, patch client.Patch) (bool, error) {
	if wc, ok := obj.(WithConditions); ok {
		SetHealthConditions(wc)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return false, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return false, err
	}
	if _, changed := fields["status"]; !changed {
		return false, nil // only metadata differs, which the status subresource does not write
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StatusWriteTimeout)
	defer cancel()
	if err := c.Status().Patch(pctx, obj, patch); err != nil {
		return false, err
	}
	return true, nil
}
