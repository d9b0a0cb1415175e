package statebackend

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A pending state is one the server received from a run (a POST it accepted: the right lock,
// following the stored state) but could not write to the state Secrets. It must outlive the
// controller's process: a run that created objects and whose state is lost would have them
// created again by the next run. So the server writes it, before answering the run, to a Secret of
// its own — tfpending-<state Secret name>, labelled LabelPendingState, gzip-compressed under the
// key "tfstate" — and deletes that Secret once the state is stored. While a state is pending its
// lock is not released (UNLOCK answers 503, and revoking the run's credentials leaves it), so that
// nothing else runs on the older stored state. A pending state over one Secret's 1 MiB (gzipped)
// is kept in memory only; the server says so through OnPending.

// LabelPendingState labels the Secret of a pending state (value "true").
const LabelPendingState = "conductor.io/pending-state"

// PendingSecretName is the name of the Secret that keeps the pending state of a workspace's state.
func PendingSecretName(workspace, suffix string) string {
	return "tfpending-" + SecretName(workspace, suffix)
}

// savePending writes state (JSON) as the pending state of h, with the lock ID of the run that sent
// it, to its Secret (created or updated): an error when it is over chunkSize (1 MiB) gzipped, or
// the API server's.
func savePending(ctx context.Context, h *Handle, state []byte, lockID string) error {
	gz, err := gzipBytes(state)
	if err != nil {
		return err
	}
	if len(gz) > chunkSize {
		return fmt.Errorf("the pending state is %d bytes gzipped, more than one Secret holds", len(gz))
	}
	labels := map[string]string{LabelPendingState: "true"}
	for k, v := range h.labels {
		labels[k] = v
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: PendingSecretName(h.workspace, h.suffix), Namespace: h.store.namespace, Labels: labels,
			Annotations: map[string]string{"encoding": "gzip", pendingLockAnnotation: lockID}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{stateKey: gz},
	}
	secrets := h.store.kube.CoreV1().Secrets(h.store.namespace)
	_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	return err
}

// pendingLockAnnotation records, on a pending state's Secret, the lock ID of the run that sent it.
const pendingLockAnnotation = "conductor.io/pending-lock-id"

// listPending reads every pending state Secret of the store's namespace (DefaultWorkspace, the
// http backend's only one), by suffix: the state, its labels, and the lock ID of the run that
// sent it; and, by suffix, the pending Secrets whose data does not decode (their states must not
// be ignored, nor stop the others).
func (st *Store) listPending(ctx context.Context) (map[string]pendingState, map[string]error, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelPendingState: "true"})
	list, err := st.kube.CoreV1().Secrets(st.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, err
	}
	prefix := PendingSecretName(DefaultWorkspace, "")
	out, bad := map[string]pendingState{}, map[string]error{}
	for _, s := range list.Items {
		suffix, ok := strings.CutPrefix(s.Name, prefix)
		if !ok || suffix == "" {
			continue
		}
		state, err := gunzipBytes(s.Data[stateKey])
		if err != nil {
			bad[suffix] = fmt.Errorf("pending state Secret %s: %w", s.Name, err)
			continue
		}
		extra := maps.Clone(s.Labels)
		delete(extra, LabelPendingState)
		out[suffix] = pendingState{state: state, labels: extra, lockID: s.Annotations[pendingLockAnnotation]}
	}
	return out, bad, nil
}

// deletePending deletes h's pending state Secret (gone already is not an error).
func deletePending(ctx context.Context, h *Handle) error {
	err := h.store.kube.CoreV1().Secrets(h.store.namespace).Delete(ctx, PendingSecretName(h.workspace, h.suffix), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// writePending writes a pending state (JSON) over h's stored one: refused with a *ConflictError when the stored
// state is readable and the pending one does not follow it (another lineage, a lower serial: the
// stored state moved on, and is never overwritten); written whatever is stored when the stored
// state cannot be read (a write that failed half-way leaves it so).
func writePending(ctx context.Context, h *Handle, state []byte) error {
	sent, err := decodeJSON(state)
	if err != nil {
		return &InvalidStateError{Err: err}
	}
	if stored, found, err := readStateJSON(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix); err == nil && found {
		if cur, err := decodeJSON(stored); err == nil {
			if err := checkFollows(h.store.Keyring(), cur, sent, stored, state, SecretName(h.workspace, h.suffix)); err != nil {
				return err
			}
		}
	}
	return h.write(ctx, state, false)
}
