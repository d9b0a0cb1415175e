package statebackend

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"

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
	// Resources counts the resources in state.
	Resources int
}

// Decode reads serial, lineage and resource count from a state Secret's data ("tfstate", gzip JSON).
// It returns an error when the data is missing or malformed.
func Decode(data map[string][]byte) (State, error) {
	raw, ok := data[stateKey]
	if !ok {
		return State{}, fmt.Errorf("no %q key in state Secret", stateKey)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return State{}, fmt.Errorf("state is not gzip data: %w", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return State{}, fmt.Errorf("reading state: %w", err)
	}
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

// Read returns the state of a workspace and suffix, or found=false when there is no state Secret.
func Read(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (st State, found bool, err error) {
	name := SecretName(workspace, suffix)
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return State{SecretName: name}, false, nil
	}
	if err != nil {
		return State{}, false, err
	}
	st, err = Decode(s.Data)
	st.SecretName = name
	return st, true, err
}

// Delete removes a workspace's state Secret and lock Lease. Objects already gone are not an error.
func Delete(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) error {
	err := kube.CoreV1().Secrets(namespace).Delete(ctx, SecretName(workspace, suffix), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting state Secret: %w", err)
	}
	err = kube.CoordinationV1().Leases(namespace).Delete(ctx, LeaseName(workspace, suffix), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting state lock Lease: %w", err)
	}
	return nil
}
