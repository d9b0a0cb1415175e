package statebackend

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AnnotationAdoptedFrom records, on an adopted state Secret, the Secret it was adopted from.
const AnnotationAdoptedFrom = "conductor.io/adopted-from"

// AdoptError is an adoption refused: the named Secret is missing, not orphaned, used by another
// resource, or the resource already has state of its own.
type AdoptError struct{ Message string }

func (e *AdoptError) Error() string { return e.Message }

// Adopt makes the orphaned state Secret `from` the state of resource, whose state lives in the
// workspace's Secret for suffix: the data is copied to that Secret (with the backend's labels for
// the new suffix and LabelResource), then `from` is deleted. Each step is idempotent, so an
// adoption interrupted between the two finishes on the next call. It returns an *AdoptError when
// `from` does not exist, is not labelled LabelOrphanedFrom, is labelled as another resource's
// state, or when the resource already has state with resources in it.
func Adopt(ctx context.Context, kube kubernetes.Interface, namespace, from, workspace, suffix, resource string) error {
	secrets := kube.CoreV1().Secrets(namespace)
	target := SecretName(workspace, suffix)
	existing, err := secrets.Get(ctx, target, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		existing = nil
	}
	src, err := secrets.Get(ctx, from, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if existing != nil && existing.Annotations[AnnotationAdoptedFrom] == from {
			return nil // adopted earlier
		}
		return &AdoptError{fmt.Sprintf("state Secret %s/%s does not exist", namespace, from)}
	}
	if err != nil {
		return err
	}
	if owner := src.Labels[LabelResource]; owner != "" && owner != resource {
		return &AdoptError{fmt.Sprintf("state Secret %s is the state of resource %s", from, owner)}
	}
	if src.Labels[LabelOrphanedFrom] == "" {
		return &AdoptError{fmt.Sprintf("state Secret %s is not orphaned (no %s label)", from, LabelOrphanedFrom)}
	}
	if from == target {
		// The resource's own name: only the labels change.
		delete(src.Labels, LabelOrphanedFrom)
		src.Labels[LabelResource] = resource
		_, err := secrets.Update(ctx, src, metav1.UpdateOptions{})
		return err
	}
	if existing != nil && existing.Annotations[AnnotationAdoptedFrom] != from {
		if st, err := Decode(existing.Data); err == nil && st.Resources > 0 {
			return &AdoptError{fmt.Sprintf("resource %s already has state with %d resources in %s", resource, st.Resources, target)}
		}
		if err := secrets.Delete(ctx, target, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		existing = nil
	}
	if existing == nil {
		annotations := map[string]string{AnnotationAdoptedFrom: from}
		for k, v := range src.Annotations {
			annotations[k] = v
		}
		adopted := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: target, Namespace: namespace, Annotations: annotations,
				// The labels the kubernetes backend itself puts on a workspace's Secret.
				Labels: map[string]string{
					"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": workspace,
					"app.kubernetes.io/managed-by": "terraform", LabelResource: resource,
				},
			},
			Type: src.Type,
			Data: src.Data,
		}
		if _, err := secrets.Create(ctx, adopted, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("writing adopted state %s: %w", target, err)
		}
	}
	if err := secrets.Delete(ctx, from, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing adopted state %s: %w", from, err)
	}
	return nil
}

// OrphanedFrom returns the LabelOrphanedFrom label of a workspace's state Secret: the resource
// whose deletion orphaned it, or "" when the Secret is missing or not orphaned.
func OrphanedFrom(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (string, error) {
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, SecretName(workspace, suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return s.Labels[LabelOrphanedFrom], nil
}
