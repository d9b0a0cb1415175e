package statebackend

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Error is the refusal's message, naming the Secret and why.
func (e *AdoptError) Error() string { return e.Message }

// adopt makes the orphaned state Secret `from` the state of resource, whose state lives in the
// workspace's Secret for suffix: the data is copied to that Secret (with the backend's labels for
// the new suffix and LabelResource), then `from` is deleted. A state of several chunks (layout.go)
// moves whole: its -part-N Secrets are copied before and deleted before chunk 0. Each step is idempotent, so an
// adoption interrupted between the two finishes on the next call. It returns an *AdoptError when
// `from` does not exist, is not labelled LabelOrphanedFrom, is labelled as another resource's
// state, or when the resource already has state with resources in it.
func adopt(ctx context.Context, kube kubernetes.Interface, namespace, from, workspace, suffix, resource string, keys *Keyring) error {
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
	srcParts, err := sourceParts(ctx, kube, namespace, src)
	if err != nil {
		return err
	}
	if from == target {
		return relabelAdopted(ctx, kube, namespace, resource, src, srcParts)
	}
	if existing != nil && existing.Annotations[AnnotationAdoptedFrom] != from {
		st, found, err := readStatus(ctx, kube, namespace, workspace, suffix, keys)
		if errors.Is(err, ErrNoStateKey) {
			return &AdoptError{fmt.Sprintf("resource %s already has state in %s, which cannot be read: %v", resource, target, err)}
		}
		if err == nil && found && st.Resources > 0 {
			return &AdoptError{fmt.Sprintf("resource %s already has state with %d resources in %s", resource, st.Resources, target)}
		}
		if err := deleteState(ctx, kube, namespace, workspace, suffix); err != nil {
			return err
		}
		existing = nil
	}
	if existing == nil {
		if err := copyAdopted(ctx, kube, namespace, workspace, suffix, resource, src, srcParts); err != nil {
			return err
		}
	}
	for _, p := range slices.Backward(srcParts) {
		if err := secrets.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing adopted state %s: %w", p.Name, err)
		}
	}
	if err := secrets.Delete(ctx, from, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing adopted state %s: %w", from, err)
	}
	return nil
}

// relabelAdopted adopts the orphaned state whose chunk 0 is src and whose -part-N chunks are
// srcParts under its own name (the resource's own state Secret): only the labels change, on every
// chunk, chunk 0 last (LabelOrphanedFrom removed, LabelResource set to resource).
func relabelAdopted(ctx context.Context, kube kubernetes.Interface, namespace, resource string, src *corev1.Secret, srcParts []*corev1.Secret) error {
	secrets := kube.CoreV1().Secrets(namespace)
	for _, p := range slices.Backward(append([]*corev1.Secret{src}, srcParts...)) {
		delete(p.Labels, LabelOrphanedFrom)
		p.Labels[LabelResource] = resource
		if _, err := secrets.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// copyAdopted copies the orphaned state whose chunk 0 is src and whose -part-N chunks are srcParts
// to the workspace's state Secrets for suffix (none of which exists with chunk 0), labelled as the
// kubernetes backend labels a workspace's Secrets, plus LabelResource = resource; chunk 0 is
// annotated AnnotationAdoptedFrom = src's name besides src's own annotations. The -part-N chunks
// go first and any further chunks left there are deleted, so that chunk 0, the mark of a finished
// copy that a resumed adoption trusts, is written last. It returns the API server's errors.
func copyAdopted(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, resource string, src *corev1.Secret, srcParts []*corev1.Secret) error {
	target := SecretName(workspace, suffix)
	// The labels the kubernetes backend itself puts on a workspace's Secret, and LabelResource.
	labels := backendLabels(workspace, suffix, map[string]string{LabelResource: resource})
	for i, p := range srcParts {
		if err := putChunk(ctx, kube, namespace, chunkName(workspace, suffix, i+1), labels, p); err != nil {
			return fmt.Errorf("writing adopted state %s: %w", target, err)
		}
	}
	if cs, err := listChunks(ctx, kube, namespace, workspace, suffix); err != nil {
		return err
	} else if err := deleteChunks(ctx, kube, namespace, cs, len(srcParts)+1); err != nil {
		return err
	}
	annotations := map[string]string{AnnotationAdoptedFrom: src.Name}
	for k, v := range src.Annotations {
		annotations[k] = v
	}
	adopted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: namespace, Annotations: annotations, Labels: labels},
		Type:       src.Type,
		Data:       src.Data,
	}
	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, adopted, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("writing adopted state %s: %w", target, err)
	}
	return nil
}

// sourceParts returns the -part-1.. chunks of the state whose chunk 0 is src (layout.go), in
// order: those of the workspace and suffix its backend labels name, when its name is that
// workspace's state Secret name; none otherwise. It returns an error when a chunk is missing.
func sourceParts(ctx context.Context, kube kubernetes.Interface, namespace string, src *corev1.Secret) ([]*corev1.Secret, error) {
	ws, sfx := src.Labels[labelWorkspace], src.Labels[labelSuffix]
	if ws == "" || sfx == "" || SecretName(ws, sfx) != src.Name {
		return nil, nil
	}
	cs, err := listChunks(ctx, kube, namespace, ws, sfx)
	if err != nil {
		return nil, err
	}
	parts := make([]*corev1.Secret, 0, len(cs))
	for i := 1; i < len(cs); i++ {
		if cs[i] == nil {
			return nil, fmt.Errorf("state %s: chunk %s is missing", src.Name, chunkName(ws, sfx, i))
		}
		parts = append(parts, cs[i])
	}
	return parts, nil
}

// putChunk creates or updates the Secret name as a copy of the chunk src's data, type and
// annotations, with labels.
func putChunk(ctx context.Context, kube kubernetes.Interface, namespace, name string, labels map[string]string, src *corev1.Secret) error {
	secrets := kube.CoreV1().Secrets(namespace)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: src.Annotations},
		Type:       src.Type,
		Data:       src.Data,
	}
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.ResourceVersion = existing.ResourceVersion
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}

// orphanedFrom returns the LabelOrphanedFrom label of a workspace's state Secret: the resource
// whose deletion orphaned it, or "" when the Secret is missing or not orphaned.
func orphanedFrom(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (string, error) {
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, SecretName(workspace, suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return s.Labels[LabelOrphanedFrom], nil
}
