package statebackend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Labels on state Secrets (the backend sets its own tfstate* labels; these are conductor-tf's).
const (
	// LabelResource names the InfraResource whose state the Secret holds.
	LabelResource = "conductor.io/resource"
	// LabelOrphanedFrom names the deleted Retain resource that left the state behind.
	LabelOrphanedFrom = "conductor.io/orphaned-from"
)

// orphan labels a workspace's state Secret (every chunk of it, see layout.go) as orphaned from
// resource: LabelOrphanedFrom set, LabelResource removed. The state itself is untouched so that it
// can be adopted again. A missing Secret (nothing was ever applied) is not an error.
func orphan(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, resource string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{
		LabelOrphanedFrom: resource,
		LabelResource:     nil,
	}}})
	if err != nil {
		return err
	}
	cs, err := listChunks(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return fmt.Errorf("orphaning state Secret: %w", err)
	}
	// The -part-N chunks of a large state first, chunk 0 last: Adopt looks for the label on it.
	for _, idx := range slices.Backward(slices.Sorted(maps.Keys(cs))) {
		_, err = kube.CoreV1().Secrets(namespace).Patch(ctx, cs[idx].Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("orphaning state Secret %s: %w", cs[idx].Name, err)
		}
	}
	return nil
}
