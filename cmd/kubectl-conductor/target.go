package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// targetArg is the argument name of the commands that act on a resource.
const targetArg = "RESOURCE|CLAIM"

// target is the InfraResource a command acts on, and the claim it was named through, if any.
type target struct {
	Resource *v1alpha1.InfraResource
	// Claim is nil when TARGET named the resource itself.
	Claim *v1alpha1.InfraClaim
}

// String names the resource and the claim it was reached through: "InfraResource r" or
// "InfraResource r (claim ns/c)".
func (t target) String() string {
	if t.Claim == nil {
		return "InfraResource " + t.Resource.Name
	}
	return fmt.Sprintf("InfraResource %s (claim %s/%s)", t.Resource.Name, t.Claim.Namespace, t.Claim.Name)
}

// resolve finds the InfraResource TARGET names: the InfraResource of that name if there is one,
// else the resource bound to the InfraClaim of that name in cl.Namespace. Errors: neither exists;
// the claim is not bound yet (status.resourceName empty); the claim's resource is gone; any error
// reading them.
func resolve(ctx context.Context, cl *Clients, name string) (target, error) {
	res := &v1alpha1.InfraResource{}
	err := cl.Client.Get(ctx, types.NamespacedName{Name: name}, res)
	if err == nil {
		return target{Resource: res}, nil
	}
	if !apierrors.IsNotFound(err) {
		return target{}, fmt.Errorf("reading InfraResource %s: %w", name, err)
	}
	claim := &v1alpha1.InfraClaim{}
	if err := cl.Client.Get(ctx, types.NamespacedName{Namespace: cl.Namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return target{}, fmt.Errorf("no InfraResource %q, and no InfraClaim %q in namespace %q", name, name, cl.Namespace)
		}
		return target{}, fmt.Errorf("reading InfraClaim %s/%s: %w", cl.Namespace, name, err)
	}
	if claim.Status.ResourceName == "" {
		phase := claim.Status.Phase
		if phase == "" {
			phase = v1alpha1.ClaimPending
		}
		return target{}, fmt.Errorf("InfraClaim %s/%s is not bound to a resource yet (phase %s)", claim.Namespace, claim.Name, phase)
	}
	res = &v1alpha1.InfraResource{}
	if err := cl.Client.Get(ctx, types.NamespacedName{Name: claim.Status.ResourceName}, res); err != nil {
		return target{}, fmt.Errorf("reading InfraResource %s, bound to InfraClaim %s/%s: %w",
			claim.Status.ResourceName, claim.Namespace, claim.Name, err)
	}
	return target{Resource: res, Claim: claim}, nil
}

// annotate sets one annotation on a resource with a JSON merge patch (other annotations and
// fields untouched). Errors: the API server's.
func annotate(ctx context.Context, cl *Clients, res *v1alpha1.InfraResource, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	if err := cl.Client.Patch(ctx, res, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating InfraResource %s %s=%s: %w", res.Name, key, value, err)
	}
	return nil
}

// summary renders a plan summary as "+add ~change -destroy", with " (import n)" when it imports.
func summary(s v1alpha1.PlanSummary) string {
	out := fmt.Sprintf("+%d ~%d -%d", s.Add, s.Change, s.Destroy)
	if s.Import > 0 {
		out += fmt.Sprintf(" (import %d)", s.Import)
	}
	return out
}

// ago renders how long before now t was ("5m ago"), or "-" for no time.
func ago(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

// stamp renders a time as RFC 3339 UTC with its age: "2026-01-02T15:04:05Z (5m ago)".
func stamp(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + ago(now, t) + ")"
}

// short returns the first n characters of s, "-" when s is empty.
func short(s string, n int) string {
	if s == "" {
		return "-"
	}
	if len(s) > n {
		return s[:n]
	}
	return s
}

// stateSuffix is the suffix of res's state Secret as the controller recorded it in
// status.state.secretName when it chose the state's name; for a resource with none recorded, the
// suffix its name gives (statebackend.SuffixFor).
func stateSuffix(res *v1alpha1.InfraResource) string {
	if st := res.Status.State; st != nil {
		if s := statebackend.SuffixOf(st.SecretName); s != "" {
			return s
		}
	}
	return statebackend.SuffixFor(res.Name)
}
