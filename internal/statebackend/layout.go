package statebackend

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// The layout of a state in Terraform's kubernetes backend, as hashicorp/terraform v1.6.0 to v1.11.4
// and its main branch (2026-08) write it (internal/backend/remote-state/kubernetes/client.go, Put,
// getSecrets, createSecretName, getLabels, chunkPayload; chunking since v1.6.0, PR #29678), and as
// observed with terraform 1.11.4 against a real API server:
//
//   - the state JSON is gzip-compressed and the gzip bytes are cut into chunks of 1048576 bytes
//     (defaultChunkSize), the last one shorter;
//   - chunk 0 is the Secret tfstate-<workspace>-<suffix>, chunk i > 0 the Secret
//     tfstate-<workspace>-<suffix>-part-<i>; each holds its chunk under the data key "tfstate";
//   - every chunk Secret is of type Opaque, annotated encoding=gzip and labelled tfstate=true,
//     tfstateSecretSuffix=<suffix>, tfstateWorkspace=<workspace>,
//     app.kubernetes.io/managed-by=terraform plus the backend's configured labels;
//   - the reader lists Secrets with all those labels and places each at the index parsed from the
//     last "-"-separated part of its name (0 when that is not a number), so any other Secret with
//     the same labels corrupts the state, and a suffix ending in -<digits> breaks it (SuffixFor);
//   - a write updates chunks 0..n-1 in order, then deletes the chunks it no longer needs.
//
// OpenTofu (v1.12.6, same file) writes and reads chunk 0 only: a state of up to 1 MiB gzipped is a
// single Secret that both read; a larger one only Terraform (and this package) can read.

// chunkSize is the size in bytes of a state chunk, Terraform's defaultChunkSize.
const chunkSize = 1048576

// Label keys and values of the backend (client.go: tfstateKey, tfstateSecretSuffixKey,
// tfstateWorkspaceKey, managedByKey).
const (
	labelTFState   = "tfstate"
	labelSuffix    = "tfstateSecretSuffix"
	labelWorkspace = "tfstateWorkspace"
	labelManagedBy = "app.kubernetes.io/managed-by"
)

// backendLabels are the labels the backend puts on a workspace's Secrets and Lease: its own four,
// then extra (the backend's `labels` setting), which may not override them.
func backendLabels(workspace, suffix string, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+4)
	maps.Copy(l, extra)
	l[labelTFState] = "true"
	l[labelSuffix] = suffix
	l[labelWorkspace] = workspace
	l[labelManagedBy] = "terraform"
	return l
}

// chunkName is the name of chunk idx (0-based) of a workspace's state.
func chunkName(workspace, suffix string, idx int) string {
	if idx == 0 {
		return SecretName(workspace, suffix)
	}
	return fmt.Sprintf("%s-part-%d", SecretName(workspace, suffix), idx)
}

// gzipBytes compresses data with gzip's default level.
func gzipBytes(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gunzipBytes decompresses gzip data, checking its CRC (so a state assembled from chunks of two
// different writes is an error, not a wrong state).
func gunzipBytes(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	return out, zr.Close()
}

// chunks splits data into pieces of at most size bytes (none for empty data).
func chunks(data []byte, size int) [][]byte {
	var out [][]byte
	for len(data) > size {
		out = append(out, data[:size])
		data = data[size:]
	}
	if len(data) > 0 {
		out = append(out, data)
	}
	return out
}

// listChunks returns a workspace's chunk Secrets, index -> Secret: Secret tfstate-<ws>-<suffix>
// (index 0, read by name) and every Secret labelled as the backend labels that workspace's state
// named tfstate-<ws>-<suffix>-part-<i>. Other Secrets are ignored.
func listChunks(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (map[int]*corev1.Secret, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	out := map[int]*corev1.Secret{}
	main, err := secrets.Get(ctx, SecretName(workspace, suffix), metav1.GetOptions{})
	switch {
	case err == nil:
		out[0] = main
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{labelTFState: "true", labelSuffix: suffix, labelWorkspace: workspace})
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	prefix := SecretName(workspace, suffix) + "-part-"
	for i := range list.Items {
		s := &list.Items[i]
		idx, err := strconv.Atoi(strings.TrimPrefix(s.Name, prefix))
		if !strings.HasPrefix(s.Name, prefix) || err != nil || idx < 1 {
			continue
		}
		out[idx] = s
	}
	return out, nil
}

// readStateJSON returns the state JSON of a workspace (uncompressed), assembled from its chunks, or
// found=false when there is no Secret tfstate-<workspace>-<suffix> or it holds no "tfstate" key
// (as Terraform reads it).
// It returns an error when a chunk is missing (parts 1..n-1 must all exist) or the data is not
// one gzip stream with a valid checksum. Single-Secret states written by OpenTofu read the same.
//
// A first chunk shorter than a whole chunk is the whole state (Put cuts whole chunks first): it is
// read with one GET, and the Secrets are listed only for a state of two chunks or more.
func readStateJSON(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (state []byte, found bool, err error) {
	state, _, found, err = readState(ctx, kube, namespace, workspace, suffix)
	return state, found, err
}

// readState is ReadState; it also returns chunk 0's Secret when the state is that one Secret
// (nil for a state of two chunks or more, or none), so that a writer can update it without reading
// it again.
func readState(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (state []byte, single *corev1.Secret, found bool, err error) {
	main, err := kube.CoreV1().Secrets(namespace).Get(ctx, SecretName(workspace, suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	if _, ok := main.Data[stateKey]; ok && len(main.Data[stateKey]) < chunkSize {
		single = main
	}
	state, found, err = assembleState(ctx, kube, namespace, workspace, suffix, main)
	return state, single, found, err
}

// assembleState reads the state whose chunk 0 is main: main alone when it is shorter than a chunk,
// else every chunk (listChunks).
func assembleState(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string, main *corev1.Secret) (state []byte, found bool, err error) {
	if data, ok := main.Data[stateKey]; !ok {
		return nil, false, nil
	} else if len(data) < chunkSize {
		if state, err = gunzipBytes(data); err != nil {
			return nil, false, fmt.Errorf("state %s: %w", SecretName(workspace, suffix), err)
		}
		return state, true, nil
	}
	cs, err := listChunks(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return nil, false, err
	}
	if cs[0] == nil {
		return nil, false, nil // leftover -part-N Secrets without chunk 0 are no state to Terraform either
	}
	if _, ok := cs[0].Data[stateKey]; !ok {
		return nil, false, nil
	}
	var gz []byte
	for i := 0; i < len(cs); i++ {
		s := cs[i]
		if s == nil {
			return nil, false, fmt.Errorf("state %s: chunk %s is missing (%d chunks found)", SecretName(workspace, suffix), chunkName(workspace, suffix, i), len(cs))
		}
		gz = append(gz, s.Data[stateKey]...)
	}
	state, err = gunzipBytes(gz)
	if err != nil {
		return nil, false, fmt.Errorf("state %s (%d chunks): %w", SecretName(workspace, suffix), len(cs), err)
	}
	return state, true, nil
}

// writeStateJSON stores state (JSON, uncompressed) as a workspace's state in Terraform's layout:
// gzip, cut into 1 MiB chunks, each chunk created (with the backend's labels plus extra, and the
// encoding=gzip annotation) or updated in order 0..n-1, then chunks from an earlier, larger state
// deleted. Existing Secrets keep their labels, with the backend's and extra added. Each update
// carries the resourceVersion read, so a concurrent writer makes it fail with a Conflict error
// rather than being overwritten silently; the write is not atomic across chunks (nor is
// Terraform's), which the gzip checksum detects on read.
func writeStateJSON(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string, extra map[string]string, state []byte) error {
	gz, err := gzipBytes(state)
	if err != nil {
		return err
	}
	existing, err := listChunks(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return fmt.Errorf("listing state chunks: %w", err)
	}
	want := backendLabels(workspace, suffix, extra)
	secrets := kube.CoreV1().Secrets(namespace)
	parts := chunks(gz, chunkSize)
	for idx, data := range parts {
		s := existing[idx]
		if s == nil {
			s = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name: chunkName(workspace, suffix, idx), Namespace: namespace,
					Labels: want, Annotations: map[string]string{"encoding": "gzip"},
				},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{stateKey: data},
			}
			if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating state chunk %s: %w", s.Name, err)
			}
			continue
		}
		s = s.DeepCopy()
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		maps.Copy(s.Labels, want)
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[stateKey] = data
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating state chunk %s: %w", s.Name, err)
		}
	}
	return deleteChunks(ctx, kube, namespace, existing, len(parts))
}

// deleteChunks deletes the chunks in cs whose index is at least from, highest first, so that a
// reader never finds a gap below a chunk that still exists. Chunks already gone are not an error.
func deleteChunks(ctx context.Context, kube kubernetes.Interface, namespace string, cs map[int]*corev1.Secret, from int) error {
	var idx []int
	for i := range cs {
		if i >= from {
			idx = append(idx, i)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	for _, i := range idx {
		err := kube.CoreV1().Secrets(namespace).Delete(ctx, cs[i].Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &cs[i].UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting state chunk %s: %w", cs[i].Name, err)
		}
	}
	return nil
}

// deleteState deletes every chunk of a workspace's state.
func deleteState(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) error {
	cs, err := listChunks(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return err
	}
	return deleteChunks(ctx, kube, namespace, cs, 0)
}
