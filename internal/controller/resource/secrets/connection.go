package secrets

// The connection Secret: every output of the last apply (sensitive ones included) and the
// generated passwords, in the bound claim's namespace or where the resource names.

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// connectionData turns outputs into Secret data: strings as they are, other values as JSON.
func connectionData(outs map[string]tfjson.Output) map[string][]byte {
	data := make(map[string][]byte, len(outs))
	for name, o := range outs {
		var s string
		if err := json.Unmarshal(o.Value, &s); err == nil {
			data[name] = []byte(s)
		} else {
			data[name] = append([]byte(nil), o.Value...)
		}
	}
	return data
}

// connectionTarget is where the resource's outputs go: the bound claim's connection Secret, owned
// by the claim, or the resource's own writeConnectionSecretToRef, owned by the resource; owner is
// nil when there is none. A claim that only reserves the resource (a claimRef without its UID, or a
// claim that does not name the resource back) gets nothing: outputs reach a namespace only
// through a bind.
func (r *Keeper) connectionTarget(ctx context.Context, res *v1alpha1.InfraResource) (target types.NamespacedName, owner client.Object, err error) {
	if ref := res.Spec.ClaimRef; ref != nil {
		claim := &v1alpha1.InfraClaim{}
		if err := r.api.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, claim); err == nil &&
			provision.IsBoundPair(res, claim) && claim.Spec.WriteConnectionSecretToRef != nil && claim.DeletionTimestamp.IsZero() {
			return types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WriteConnectionSecretToRef.Name}, claim, nil
		} else if err != nil && !apierrors.IsNotFound(err) {
			return target, nil, err
		}
	}
	if ref := res.Spec.WriteConnectionSecretToRef; ref != nil {
		return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, res, nil
	}
	return target, nil, nil
}

// WriteConnectionSecret writes every output (sensitive ones included) to the connection Secret
// (connectionTarget), deletes the one written before when the target moved, and records the
// target in status.connectionSecret.
func (r *Keeper) WriteConnectionSecret(ctx context.Context, res *v1alpha1.InfraResource, outs map[string]tfjson.Output) error {
	target, owner, err := r.connectionTarget(ctx, res)
	if err != nil || owner == nil {
		return err
	}
	return r.putConnectionSecret(ctx, res, target, owner, outs)
}

// KeepConnectionSecret runs on a sync without a run, once the resource was applied: when the
// connection Secret status records is missing, or the target moved (the claim renamed it), it
// writes the outputs of the resource's state (read through h, its one state handle; nil:
// nothing to write from) there (stateOutputs), with its generated passwords,
// and deletes the old one. A Secret that is present is left as it is: one GET per sync, no state
// read.
func (r *Keeper) KeepConnectionSecret(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) error {
	target, owner, err := r.connectionTarget(ctx, res)
	if err != nil || owner == nil || h == nil {
		return err
	}
	if ref := res.Status.ConnectionSecret; ref != nil && ref.Namespace == target.Namespace && ref.Name == target.Name {
		err := r.api.Get(ctx, target, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	doc, found, err := h.Read(ctx)
	if err != nil || !found {
		return err
	}
	outs, err := stateOutputs(doc)
	if err != nil {
		return err
	}
	// The passwords the infrastructure has: a rotation not applied yet is not in it.
	pw, err := r.appliedPasswords(ctx, res)
	if err != nil {
		return err
	}
	if err := r.putConnectionSecret(ctx, res, target, owner, WithPasswords(res, outs, pw)); err != nil {
		return err
	}
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonConnectionSecretWritten, "KeepConnectionSecret",
		"connection Secret %s was missing: written from the state's outputs", target)
	return nil
}

// putConnectionSecret writes outs to target, owned by owner and labelled with the resource; it
// refuses a Secret of that name that is not this resource's. Then it deletes the connection Secret
// written before, when it was elsewhere and is still this resource's, and records target.
//
// The first write for a resource (status records no connection Secret) is a create, one request;
// an existing Secret of that name is then read and checked as every later write does.
func (r *Keeper) putConnectionSecret(ctx context.Context, res *v1alpha1.InfraResource, target types.NamespacedName, owner client.Object, outs map[string]tfjson.Output) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}}
	mutate := func() error {
		if secret.ResourceVersion != "" && !provision.IsConnectionSecretOf(secret, res) {
			return fmt.Errorf("Secret %s exists and is not the connection Secret of resource %s; choose another name", target, res.Name)
		}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = connectionData(outs)
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[statebackend.LabelResource] = v1alpha1.LabelValue(res.Name)
		return controllerutil.SetControllerReference(owner, secret, r.api.Scheme())
	}
	var err error
	if res.Status.ConnectionSecret == nil {
		if err = mutate(); err == nil {
			err = r.api.Create(ctx, secret)
		}
		if apierrors.IsAlreadyExists(err) {
			secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}}
			_, err = controllerutil.CreateOrUpdate(ctx, r.api, secret, mutate)
		}
	} else {
		_, err = controllerutil.CreateOrUpdate(ctx, r.api, secret, mutate)
	}
	if err != nil {
		return fmt.Errorf("writing connection Secret %s: %w", target, err)
	}
	if old := res.Status.ConnectionSecret; old != nil && (old.Namespace != target.Namespace || old.Name != target.Name) {
		prev := &corev1.Secret{}
		err := r.api.Get(ctx, types.NamespacedName{Namespace: old.Namespace, Name: old.Name}, prev)
		if err == nil && provision.IsConnectionSecretOf(prev, res) && controllerutil.ContainsFinalizer(prev, v1alpha1.FinalizerReadByClaims) {
			// Claims that read it are told of the new one (its name is in their digest) and point
			// their runs there.
			controllerutil.RemoveFinalizer(prev, v1alpha1.FinalizerReadByClaims)
			err = r.api.Update(ctx, prev)
		}
		if err == nil && provision.IsConnectionSecretOf(prev, res) {
			err = r.api.Delete(ctx, prev, client.Preconditions{UID: &prev.UID})
		}
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the previous connection Secret %s/%s: %w", old.Namespace, old.Name, err)
		}
	}
	res.Status.ConnectionSecret = &v1alpha1.SecretReference{Namespace: target.Namespace, Name: target.Name}
	return nil
}

// stateOutputs reads the root module's outputs from a Terraform state document (format version 4,
// as Terraform and OpenTofu write it: "outputs": {name: {"value", "type", "sensitive"}}), the
// same outputs `output -json` reports after an apply.
func stateOutputs(state []byte) (map[string]tfjson.Output, error) {
	var doc struct {
		Version int `json:"version"`
		Outputs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Sensitive bool            `json:"sensitive"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(state, &doc); err != nil {
		return nil, fmt.Errorf("reading the state's outputs: %w", err)
	}
	if doc.Version != 4 {
		return nil, fmt.Errorf("reading the state's outputs: state format version %d, not 4", doc.Version)
	}
	outs := make(map[string]tfjson.Output, len(doc.Outputs))
	for name, o := range doc.Outputs {
		outs[name] = tfjson.Output{Value: o.Value, Sensitive: o.Sensitive}
	}
	return outs, nil
}
