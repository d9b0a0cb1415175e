package controller

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
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Outputs: non-sensitive ones in status, all of them in the connection Secret.

// setOutputs keeps the non-sensitive outputs in status; sensitive ones never reach any status.
func setOutputs(res *v1alpha1.InfraResource, outs map[string]tfrunner.Output) {
	res.Status.Outputs = nil
	for name, o := range outs {
		if o.Sensitive {
			continue
		}
		if res.Status.Outputs == nil {
			res.Status.Outputs = v1alpha1.Variables{}
		}
		res.Status.Outputs[name] = jsonValue(o.Value)
	}
}

// connectionData turns outputs into Secret data: strings as they are, other values as JSON.
func connectionData(outs map[string]tfrunner.Output) map[string][]byte {
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

// writeConnectionSecret writes every output (sensitive ones included) to the bound claim's
// connection Secret, owned by the claim, or to the resource's own writeConnectionSecretToRef.
// A claim that only reserves the resource (a claimRef without its UID, or a claim that does not
// name the resource back) gets nothing: outputs reach a namespace only through a bind.
func (r *ResourceReconciler) writeConnectionSecret(ctx context.Context, res *v1alpha1.InfraResource, outs map[string]tfrunner.Output) error {
	var target types.NamespacedName
	var owner client.Object
	if ref := res.Spec.ClaimRef; ref != nil {
		claim := &v1alpha1.InfraClaim{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, claim); err == nil &&
			isBoundPair(res, claim) && claim.Spec.WriteConnectionSecretToRef != nil && claim.DeletionTimestamp.IsZero() {
			target = types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WriteConnectionSecretToRef.Name}
			owner = claim
		} else if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if owner == nil && res.Spec.WriteConnectionSecretToRef != nil {
		target = types.NamespacedName{Namespace: res.Spec.WriteConnectionSecretToRef.Namespace, Name: res.Spec.WriteConnectionSecretToRef.Name}
		owner = res
	}
	if owner == nil {
		return nil
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		if secret.ResourceVersion != "" && secret.Labels[statebackend.LabelResource] != statebackend.LabelValue(res.Name) {
			return fmt.Errorf("Secret %s exists and is not the connection Secret of resource %s; choose another name", target, res.Name)
		}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = connectionData(outs)
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[statebackend.LabelResource] = statebackend.LabelValue(res.Name)
		return controllerutil.SetControllerReference(owner, secret, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing connection Secret %s: %w", target, err)
	}
	return nil
}

// isBoundPair reports whether res and claim are bound to each other, as the PV controller's
// IsVolumeBoundToClaim and its check of pvc.Spec.VolumeName (pv_controller.go, syncBoundClaim):
// the resource's claimRef names the claim with its UID (only a bind writes it), and the claim
// names no other resource (it names this one, or the bind has not written the claim yet). A
// claimRef without a UID is a reservation (pre-binding), not a bind.
func isBoundPair(res *v1alpha1.InfraResource, claim *v1alpha1.InfraClaim) bool {
	ref := res.Spec.ClaimRef
	return ref != nil && ref.UID != "" && ref.UID == claim.UID && ref.Namespace == claim.Namespace &&
		ref.Name == claim.Name && (claim.Spec.ResourceName == res.Name || claim.Spec.ResourceName == "")
}
