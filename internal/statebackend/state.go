package statebackend

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// stateKey is the data key of the state in the backend's Secret (gzip-compressed JSON).
const stateKey = "tfstate"

// State is what status shows of a Terraform state.
type State struct {
	// SecretName is the state Secret's name.
	SecretName string
	// Serial increases with every write of the state.
	Serial int64
	// Lineage identifies the state across its serials.
	Lineage string
	// Resources counts the resources in state; -1 when not known (a state Server.TakeWritten
	// reports as a run wrote it encrypted: the server passes it on without decrypting it).
	Resources int
}

// Decode reads serial, lineage and resource count from a single state Secret's data ("tfstate",
// gzip JSON). It returns an error when the data is missing or malformed. A state of several chunks
// (see layout.go) decodes only through Read.
func Decode(data map[string][]byte) (State, error) {
	raw, ok := data[stateKey]
	if !ok {
		return State{}, fmt.Errorf("no %q key in state Secret", stateKey)
	}
	plain, err := gunzipBytes(raw)
	if err != nil {
		return State{}, fmt.Errorf("state is not gzip data: %w", err)
	}
	return decodeJSON(plain)
}

// decodeJSON reads serial, lineage and resource count from state JSON.
func decodeJSON(plain []byte) (State, error) {
	var doc struct {
		Serial    int64             `json:"serial"`
		Lineage   string            `json:"lineage"`
		Resources []json.RawMessage `json:"resources"`
	}
	if err := json.Unmarshal(plain, &doc); err != nil {
		return State{}, fmt.Errorf("state is not JSON: %w", err)
	}
	return State{Serial: doc.Serial, Lineage: doc.Lineage, Resources: len(doc.Resources)}, nil
}

// readStatus returns the state of a workspace and suffix, assembled from all its chunks (ReadState) and
// opened with keys (nil: none; Keyring.Open), or found=false when there is none (no Secret, or no
// "tfstate" key in it).
func readStatus(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string, keys *Keyring) (st State, found bool, err error) {
	name := SecretName(workspace, suffix)
	plain, found, err := readStateJSON(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return State{}, false, err
	}
	if !found {
		return State{SecretName: name}, false, nil
	}
	if plain, err = keys.Open(plain); err != nil {
		return State{SecretName: name}, true, err
	}
	st, err = decodeJSON(plain)
	st.SecretName = name
	return st, true, err
}

// deleteAll removes a workspace's state: every chunk Secret, the kept history (history.go) and the
// lock Lease. Objects already gone are not an error.
func deleteAll(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) error {
	if err := deleteState(ctx, kube, namespace, workspace, suffix); err != nil {
		return fmt.Errorf("deleting state Secret: %w", err)
	}
	if err := deleteHistory(ctx, kube, namespace, workspace, suffix); err != nil {
		return fmt.Errorf("deleting state history: %w", err)
	}
	err := kube.CoordinationV1().Leases(namespace).Delete(ctx, LeaseName(workspace, suffix), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting state lock Lease: %w", err)
	}
	return nil
}

// exists reports whether anything of a workspace's state is in namespace: its chunk-0 Secret or its
// lock Lease. A state name whose Secret or Lease exists is taken, whoever wrote it.
func exists(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (bool, error) {
	_, err := kube.CoreV1().Secrets(namespace).Get(ctx, SecretName(workspace, suffix), metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err == nil, err
	}
	_, err = kube.CoordinationV1().Leases(namespace).Get(ctx, LeaseName(workspace, suffix), metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err == nil, err
	}
	return false, nil
}
