package statebackend

import (
	"context"
	"encoding/json"
	"fmt"

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

// Orphan labels a workspace's state Secret as orphaned from resource: LabelOrphanedFrom set,
// LabelResource removed. The state itself is untouched so that it can be adopted again. A missing
// Secret (nothing was ever applied) is not an error.
func Orphan(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, resource string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{
		LabelOrphanedFrom: resource,
		LabelResource:     nil,
	}}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Secrets(namespace).Patch(ctx, SecretName(workspace, suffix), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("orphaning state Secret: %w", err)
	}
	return nil
}
