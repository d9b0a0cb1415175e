package resource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Rotation: a Secret named by variablesFrom or env that changes is noticed by its hash at each sync,
// without a watch. A watch of Secrets (even metadata-only) needs list and watch on every Secret of
// the cluster, which would let the manager read them all; checking by hash keeps the manager's
// RBAC at get on the Secrets it is told about. The cost is one GET per Secret input per sync that
// runs nothing; an applied resource with Secret inputs syncs at least every SecretCheckInterval.

// DefaultSecretCheckInterval is how often the Secret inputs of an applied resource are read to
// notice a rotation, when Reconciler.SecretCheckInterval is zero.
const DefaultSecretCheckInterval = time.Minute

// hasSecretInputs reports whether the resource reads any Secret (variablesFrom, env, or its
// generated passwords').
func hasSecretInputs(res *v1alpha1.InfraResource) bool {
	return len(res.Spec.VariablesFrom) > 0 || len(res.Spec.Env) > 0 || len(res.Spec.GeneratedPasswords) > 0
}

// inputsHash is "sha256:" and the hex SHA-256 of a run's Secret inputs: the values of the
// resource's variablesFrom and env names and of its generated passwords in spec (and nothing else
// the run's environment holds, such as its per-run state credentials), by name; "" when the
// resource has none. Status records it, never a value.
func inputsHash(res *v1alpha1.InfraResource, spec tfrunner.Spec) string {
	if !hasSecretInputs(res) {
		return ""
	}
	h := sha256.New()
	for _, part := range []struct {
		kind   string
		inputs []v1alpha1.SecretInput
		values map[string]string
	}{{"var", res.Spec.VariablesFrom, spec.SensitiveVariables}, {"env", res.Spec.Env, spec.Env}, {"password", passwordNames(res), spec.EphemeralVariables}} {
		names := make([]string, 0, len(part.inputs))
		for _, in := range part.inputs {
			names = append(names, in.Name)
		}
		slices.Sort(names)
		for _, n := range names {
			// Lengths first: no two different sets of inputs write the same bytes.
			h.Write([]byte(part.kind))
			writeLen(h, n)
			writeLen(h, part.values[n])
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// passwordNames names the generated passwords' variables as inputs, for inputsHash.
func passwordNames(res *v1alpha1.InfraResource) []v1alpha1.SecretInput {
	out := make([]v1alpha1.SecretInput, len(res.Spec.GeneratedPasswords))
	for i, p := range res.Spec.GeneratedPasswords {
		out[i].Name = p.Variable
	}
	return out
}

func writeLen(h interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	for i, l := 0, uint64(len(s)); i < 8; i++ {
		n[i] = byte(l >> (8 * i))
	}
	h.Write(n[:])
	h.Write([]byte(s))
}

// secretInputsRotated reads the resource's Secret inputs now and reports whether their hash differs
// from the one its last apply recorded. A resource applied before hashes were recorded gets the
// current hash recorded and is not run for it. A missing Secret or key counts as a change: the run
// then fails with SecretNotFound, as any run would. Generated passwords that are missing or asked
// to rotate (passwordInputs' due) count as a change too: the run makes them.
func (r *syncer) secretInputsRotated(ctx context.Context, res *v1alpha1.InfraResource) (bool, error) {
	spec := tfrunner.Spec{SensitiveVariables: map[string]string{}, Env: map[string]string{}}
	if due, err := r.secrets.PasswordInputs(ctx, res, &spec, false); err != nil || due {
		return due, err
	}
	if err := r.secrets.SecretInputs(ctx, res, &spec); err != nil {
		var ie *provision.InputError
		if errors.As(err, &ie) {
			return true, nil // a missing Secret or key: the run reports it
		}
		return false, err
	}
	now := inputsHash(res, spec)
	if res.Status.InputsHash == "" {
		res.Status.InputsHash = now
		return false, nil
	}
	return now != res.Status.InputsHash, nil
}

// rotated reports whether a run's Secret inputs differ from those of the last apply: such a run
// applies (through the approval gate) rather than only checking for drift.
func rotated(res *v1alpha1.InfraResource, spec tfrunner.Spec) bool {
	return res.Status.InputsHash != "" && inputsHash(res, spec) != res.Status.InputsHash
}

// noteRotation records the event of a rotation noticed by a sync.
func (r *syncer) noteRotation(res *v1alpha1.InfraResource) {
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonSecretInputsChanged, "Sync",
		"a Secret input (variablesFrom, env or a generated password) changed since the last apply: planning and applying once")
}
