package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
const targetArg = "claim/NAME|resource/NAME|NAME"

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

// Kind prefixes of TARGET, as kubectl spells them (type/name).
var (
	claimPrefixes    = []string{"claim/", "infraclaim/", "iclaim/", "infraclaims/", "infraclaim.conductor.io/"}
	resourcePrefixes = []string{"resource/", "infraresource/", "ires/", "infraresources/", "infraresource.conductor.io/"}
)

// resolve finds the InfraResource TARGET names, kubectl's way:
//   - claim/NAME: the InfraClaim NAME in cl.Namespace, and the resource bound to it — only when
//     that resource's claimRef names the claim by UID (a Lost claim keeps a resource name that is
//     no longer its own).
//   - resource/NAME: the InfraResource NAME.
//   - NAME: whichever of the two exists; when both do and are not one bound pair, it is refused
//     with the two candidates, so that a command never acts on the wrong object.
//
// Errors: nothing of that name; the claim not bound (or its resource bound to another claim);
// a bare NAME that means two things; any error reading them.
func resolve(ctx context.Context, cl *Clients, name string) (target, error) {
	for _, p := range claimPrefixes {
		if n, ok := strings.CutPrefix(name, p); ok {
			return resolveClaim(ctx, cl, n)
		}
	}
	for _, p := range resourcePrefixes {
		if n, ok := strings.CutPrefix(name, p); ok {
			res, found, err := getResource(ctx, cl, n)
			if err == nil && !found {
				err = fmt.Errorf("no InfraResource %q", n)
			}
			return target{Resource: res}, err
		}
	}
	res, resFound, err := getResource(ctx, cl, name)
	if err != nil {
		return target{}, err
	}
	claim := &v1alpha1.InfraClaim{}
	err = cl.Client.Get(ctx, types.NamespacedName{Namespace: cl.Namespace, Name: name}, claim)
	switch {
	case apierrors.IsNotFound(err) && resFound:
		return target{Resource: res}, nil
	case apierrors.IsNotFound(err):
		return target{}, fmt.Errorf("no InfraResource %q, and no InfraClaim %q in namespace %q", name, name, cl.Namespace)
	case err != nil:
		return target{}, fmt.Errorf("reading InfraClaim %s/%s: %w", cl.Namespace, name, err)
	}
	if !resFound {
		return resolveClaim(ctx, cl, name)
	}
	if t, err := resolveClaim(ctx, cl, name); err == nil && t.Resource.Name == res.Name {
		return t, nil // the claim and its own resource share the name: one target
	}
	return target{}, fmt.Errorf("%q names both InfraResource %s and InfraClaim %s/%s (bound to %s): say resource/%s or claim/%s",
		name, name, cl.Namespace, name, orNone(claim.Status.ResourceName), name, name)
}

// resolveClaim is the InfraClaim name in cl.Namespace and the resource bound to it: the resource
// its status names, whose claimRef names the claim (namespace, name and UID).
func resolveClaim(ctx context.Context, cl *Clients, name string) (target, error) {
	claim := &v1alpha1.InfraClaim{}
	if err := cl.Client.Get(ctx, types.NamespacedName{Namespace: cl.Namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return target{}, fmt.Errorf("no InfraClaim %q in namespace %q", name, cl.Namespace)
		}
		return target{}, fmt.Errorf("reading InfraClaim %s/%s: %w", cl.Namespace, name, err)
	}
	phase := claim.Status.Phase
	if phase == "" {
		phase = v1alpha1.ClaimPending
	}
	if claim.Status.ResourceName == "" {
		return target{}, fmt.Errorf("InfraClaim %s/%s is not bound to a resource yet (phase %s)", claim.Namespace, claim.Name, phase)
	}
	res, found, err := getResource(ctx, cl, claim.Status.ResourceName)
	if err != nil {
		return target{}, err
	}
	if !found {
		return target{}, fmt.Errorf("InfraClaim %s/%s (phase %s) names InfraResource %s, which does not exist",
			claim.Namespace, claim.Name, phase, claim.Status.ResourceName)
	}
	if ref := res.Spec.ClaimRef; ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name || ref.UID != claim.UID {
		return target{}, fmt.Errorf("InfraClaim %s/%s (phase %s) names InfraResource %s, which is not bound to it", claim.Namespace, claim.Name, phase, res.Name)
	}
	return target{Resource: res, Claim: claim}, nil
}

// getResource reads the InfraResource name; found is false when there is none.
func getResource(ctx context.Context, cl *Clients, name string) (*v1alpha1.InfraResource, bool, error) {
	res := &v1alpha1.InfraResource{}
	err := cl.Client.Get(ctx, types.NamespacedName{Name: name}, res)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading InfraResource %s: %w", name, err)
	}
	return res, true, nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
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
