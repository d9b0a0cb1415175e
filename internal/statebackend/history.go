package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// The history of a state: each version replaced by Handle.Write is kept in Secrets
// tfstate-history-<workspace>-<suffix>-<serial> (and -part-<i> for i > 0 when its gzip is over
// 1 MiB, cut as in layout.go), data key "tfstate" (gzip chunk). They carry none of the backend's
// labels, so Terraform's kubernetes backend, which lists Secrets labelled tfstate=true (client.go,
// getSecrets; backend_state.go, Workspaces), never reads them as state or as a workspace.
const (
	// LabelStateHistory marks a history Secret with the suffix of its state.
	LabelStateHistory = "conductor.io/state-history"
	// LabelStateWorkspace is the workspace of a history Secret's state.
	LabelStateWorkspace = "conductor.io/state-workspace"
	// LabelSerial is the serial of the version a history Secret holds.
	LabelSerial = "conductor.io/serial"
	// labelHistoryPart is the chunk index of a history Secret (0 for the first).
	labelHistoryPart = "conductor.io/history-part"
	// annotationLineage is the lineage of the version (a UUID, on chunk 0).
	annotationLineage = "conductor.io/lineage"
	// annotationReplacedAt is when the version was replaced (RFC 3339, UTC, on chunk 0).
	annotationReplacedAt = "conductor.io/replaced-at"
	// annotationParts is how many chunks the version has (on chunk 0).
	annotationParts = "conductor.io/history-parts"
)

// Version is one kept earlier version of a state.
type Version struct {
	// Serial and Lineage are the version's own.
	Serial  int64
	Lineage string
	// Time is when a newer version replaced it.
	Time time.Time
}

// historyName is the name of chunk idx of the kept version with this serial.
func historyName(workspace, suffix string, serial int64, idx int) string {
	n := fmt.Sprintf("tfstate-history-%s-%s-%d", workspace, suffix, serial)
	if idx > 0 {
		n = fmt.Sprintf("%s-part-%d", n, idx)
	}
	return n
}

// historySecrets lists a state's history Secrets grouped by serial.
func historySecrets(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (map[int64][]corev1.Secret, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelStateHistory: suffix, LabelStateWorkspace: workspace})
	list, err := kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := map[int64][]corev1.Secret{}
	for _, s := range list.Items {
		serial, err := strconv.ParseInt(s.Labels[LabelSerial], 10, 64)
		if err != nil {
			continue
		}
		out[serial] = append(out[serial], s)
	}
	return out, nil
}

// keepVersion stores the version cur (its JSON plain) in the history, replacing any kept version
// with the same serial. It returns the history's Secrets by serial as they are now (the listing it
// read, with this version's), for pruneHistory.
func keepVersion(ctx context.Context, h *Handle, cur State, plain []byte) (map[int64][]corev1.Secret, error) {
	gz, err := gzipBytes(plain)
	if err != nil {
		return nil, err
	}
	kube, ns := h.store.kube, h.store.namespace
	secrets := kube.CoreV1().Secrets(ns)
	old, err := historySecrets(ctx, kube, ns, h.workspace, h.suffix)
	if err != nil {
		return nil, err
	}
	var kept []corev1.Secret
	parts := chunks(gz, chunkSize)
	for idx, data := range parts {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: historyName(h.workspace, h.suffix, cur.Serial, idx), Namespace: ns,
				Labels: map[string]string{
					LabelStateHistory: h.suffix, LabelStateWorkspace: h.workspace,
					LabelSerial: strconv.FormatInt(cur.Serial, 10), labelHistoryPart: strconv.Itoa(idx),
				},
				Annotations: map[string]string{"encoding": "gzip"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{stateKey: data},
		}
		if idx == 0 {
			s.Annotations[annotationLineage] = cur.Lineage
			s.Annotations[annotationReplacedAt] = time.Now().UTC().Format(time.RFC3339)
			s.Annotations[annotationParts] = strconv.Itoa(len(parts))
		}
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var existing *corev1.Secret
			if existing, err = secrets.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				s.ResourceVersion = existing.ResourceVersion
				_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return nil, fmt.Errorf("writing history Secret %s: %w", s.Name, err)
		}
		kept = append(kept, *s)
	}
	for _, s := range old[cur.Serial] {
		if idx, _ := strconv.Atoi(s.Labels[labelHistoryPart]); idx >= len(parts) {
			if err := deleteIgnoringMissing(ctx, kube, ns, s.Name); err != nil {
				return nil, err
			}
		}
	}
	old[cur.Serial] = kept
	return old, nil
}

// pruneHistory deletes all but the newest limit kept versions (by serial) of byserial, the
// history's Secrets as keepVersion left them.
func pruneHistory(ctx context.Context, h *Handle, byserial map[int64][]corev1.Secret, limit int) error {
	kube, ns := h.store.kube, h.store.namespace
	serials := make([]int64, 0, len(byserial))
	for s := range byserial {
		serials = append(serials, s)
	}
	sort.Slice(serials, func(i, j int) bool { return serials[i] > serials[j] })
	for i := limit; i < len(serials); i++ {
		for _, s := range byserial[serials[i]] {
			if err := deleteIgnoringMissing(ctx, kube, ns, s.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteHistory deletes every kept version of a state.
func deleteHistory(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) error {
	byserial, err := historySecrets(ctx, kube, namespace, workspace, suffix)
	if err != nil {
		return err
	}
	for _, group := range byserial {
		for _, s := range group {
			if err := deleteIgnoringMissing(ctx, kube, namespace, s.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteIgnoringMissing deletes the Secret name in namespace; one gone already is not an error.
func deleteIgnoringMissing(ctx context.Context, kube kubernetes.Interface, namespace, name string) error {
	err := kube.CoreV1().Secrets(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// History returns the kept earlier versions of the state, newest (highest serial) first.
func (h *Handle) History(ctx context.Context) ([]Version, error) {
	byserial, err := historySecrets(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil {
		return nil, err
	}
	var out []Version
	for serial, group := range byserial {
		v := Version{Serial: serial}
		for _, s := range group {
			if s.Labels[labelHistoryPart] == "0" {
				v.Lineage = s.Annotations[annotationLineage]
				v.Time, _ = time.Parse(time.RFC3339, s.Annotations[annotationReplacedAt])
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Serial > out[j].Serial })
	return out, nil
}

// ErrNoVersion is returned by Restore and Version when no version with that serial is kept.
var ErrNoVersion = errors.New("no such version in the state's history")

// Version returns the state JSON of the kept version with this serial, as stored (encrypted when a
// run encrypted it: Keyring.Open reads it); ErrNoVersion (wrapped)
// when there is none, another error when its chunks are incomplete or corrupt.
func (h *Handle) Version(ctx context.Context, serial int64) ([]byte, error) {
	byserial, err := historySecrets(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil {
		return nil, err
	}
	group := byserial[serial]
	if len(group) == 0 {
		return nil, fmt.Errorf("serial %d of %s: %w", serial, SecretName(h.workspace, h.suffix), ErrNoVersion)
	}
	byidx := map[int][]byte{}
	n := -1
	for _, s := range group {
		idx, err := strconv.Atoi(s.Labels[labelHistoryPart])
		if err != nil {
			continue
		}
		byidx[idx] = s.Data[stateKey]
		if idx == 0 {
			n, _ = strconv.Atoi(s.Annotations[annotationParts])
		}
	}
	var gz []byte
	for i := range n {
		chunk, ok := byidx[i]
		if !ok {
			return nil, fmt.Errorf("version %d of %s: chunk %d of %d is missing", serial, SecretName(h.workspace, h.suffix), i, n)
		}
		gz = append(gz, chunk...)
	}
	if n < 1 {
		return nil, fmt.Errorf("version %d of %s has no first chunk", serial, SecretName(h.workspace, h.suffix))
	}
	return gunzipBytes(gz)
}

// Restore makes the kept version with this serial the current state again. The state is locked
// while it does so (a *LockedError when someone holds the lock). The version must have the
// current state's lineage (else a *ConflictError: it is another state). It is written with serial
// = current serial + 1, since Terraform refuses a state whose serial goes backwards for the same
// lineage; the version it replaces goes to history as every replaced version does, so a restore
// can itself be undone. Without a current state the version is written with its own serial.
//
// The lock is taken as a run of the state server takes it: its Info names runID (RunOfLock), so
// that a restore cut off by a crash leaves a lock the next controller recovers by that run's id.
func (h *Handle) Restore(ctx context.Context, serial int64, runID string) error {
	lockID := newLockID()
	if _, err := h.Lock(ctx, Lock{
		ID: lockID, Operation: "restore", Info: runLockInfo(runID, fmt.Sprintf("restore of serial %d", serial)),
		Who: Who(), Version: "conductor-tf", Created: time.Now().UTC(),
	}); err != nil {
		return err
	}
	defer func() { _ = h.Unlock(context.WithoutCancel(ctx), lockID) }()
	old, err := h.Version(ctx, serial)
	if err != nil {
		return err
	}
	ver, err := decodeJSON(old)
	if err != nil {
		return err
	}
	cur, found, err := h.Status(ctx)
	if err != nil {
		return err
	}
	if found {
		if cur.Lineage != "" && cur.Lineage != ver.Lineage {
			return &ConflictError{Stored: cur, Sent: ver, Message: fmt.Sprintf(
				"version %d of %s has lineage %q, the current state (serial %d) lineage %q: it is another state",
				serial, cur.SecretName, ver.Lineage, cur.Serial, cur.Lineage)}
		}
		if old, err = h.reserial(old, cur.Serial+1); err != nil {
			return err
		}
	}
	return h.Write(ctx, old)
}

// reserial returns the version state with its serial set (withSerial), encrypted with the state's
// key (Keyring.ForState, under the store's current passphrase) when the store has a keyring (an encrypted version is opened first, a plain one is
// encrypted as the next run would), plain when it has none. It returns an error wrapping
// ErrNoStateKey when the version is encrypted with a key the keyring does not hold.
func (h *Handle) reserial(state []byte, serial int64) ([]byte, error) {
	keys := h.store.Keyring()
	plain, err := keys.Open(state)
	if err != nil {
		return nil, err
	}
	if plain, err = withSerial(plain, serial); err != nil || keys == nil {
		return plain, err
	}
	return keys.ForState(StateID(h.workspace, h.suffix)).Seal(plain)
}

// withSerial returns state JSON with its top-level "serial" set, the rest unchanged in value.
func withSerial(state []byte, serial int64) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(state, &doc); err != nil {
		return nil, err
	}
	doc["serial"] = json.RawMessage(strconv.FormatInt(serial, 10))
	return json.MarshalIndent(doc, "", "  ")
}
