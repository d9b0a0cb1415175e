package resource

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// boundResource creates, in a namespace of its own, a claim naming resource name (as the claim
// controller writes it when it binds), and that resource bound to it (its claimRef with the
// claim's UID) with policy, and returns both once the controller has applied the
// resource and shows it Bound.
func boundResource(t *testing.T, runs *stateRuns, name string, policy v1alpha1.ReclaimPolicy) (*v1alpha1.InfraClaim, *v1alpha1.InfraResource) {
	t.Helper()
	ctx := context.Background()
	ns := apiserver.NewNamespace(t, envKube, "res-")
	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: v1alpha1.InfraClaimSpec{ResourceKind: "Pet", ResourceName: name}}
	if err := envClient.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "Pet", ReclaimPolicy: policy, Module: v1alpha1.ModuleSource{Source: "./m", Version: "v1"},
			ClaimRef: &v1alpha1.ClaimReference{Namespace: ns, Name: claim.Name, UID: claim.UID}}}
	if err := envClient.Create(ctx, res); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, name+" applied and Bound", func() bool {
		got, _ := getResource(t, name)
		applies, _ := runs.counts(name)
		return applies == 1 && got.Status.Phase == v1alpha1.ResourceBound && got.Status.State != nil && got.Status.State.Serial == 1
	})
	got, _ := getResource(t, name)
	if !slices.Contains(got.Finalizers, v1alpha1.FinalizerResource) || !slices.Contains(got.Finalizers, v1alpha1.FinalizerInUse) {
		t.Fatalf("finalizers %v; want the reclaim and the in-use finalizers", got.Finalizers)
	}
	return claim, got
}

// A resource deleted while its claim lives waits (FinalizerInUse) with nothing destroyed; once the
// claim is gone its Delete policy destroys the infrastructure once, deletes the state Secret, and
// the API server removes the object.
func TestEnvADeletedResourceWaitsForItsClaimThenIsDestroyedOnce(t *testing.T) {
	runs := newStateRuns()
	startController(t, runs)
	ctx := context.Background()
	claim, res := boundResource(t, runs, "env-in-use", v1alpha1.ReclaimDelete)
	sfx := state.Suffix(res)

	if err := envClient.Delete(ctx, res); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // reconciles of the deletion happen meanwhile
	got, found := getResource(t, res.Name)
	if !found || got.DeletionTimestamp.IsZero() {
		t.Fatalf("a resource in use by a live claim: found %v; want it kept, being deleted", found)
	}
	if _, destroys := runs.counts(res.Name); destroys != 0 {
		t.Fatalf("%d destroys while the claim lives; want none", destroys)
	}

	if err := envClient.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the resource gone after its claim", func() bool { _, found := getResource(t, res.Name); return !found })
	if _, destroys := runs.counts(res.Name); destroys != 1 {
		t.Errorf("%d destroys; want exactly one", destroys)
	}
	if _, found, err := statebackend.NewStore(envKube, envStateNamespace).For(sfx).Status(ctx); err != nil || found {
		t.Errorf("the state Secret after the reclaim: found %v, %v; want it deleted", found, err)
	}
}

// A claim deleted under a Retain resource leaves it Released with its state, nothing destroyed;
// under a Delete resource the controller deletes the resource itself and destroys once (as the PV
// controller reclaims a released volume).
func TestEnvAReleasedResourceIsKeptOrReclaimedByItsPolicy(t *testing.T) {
	runs := newStateRuns()
	startController(t, runs)
	ctx := context.Background()
	retainClaim, retained := boundResource(t, runs, "env-retain", v1alpha1.ReclaimRetain)
	deleteClaim, deleted := boundResource(t, runs, "env-delete", v1alpha1.ReclaimDelete)
	for _, c := range []*v1alpha1.InfraClaim{retainClaim, deleteClaim} {
		if err := envClient.Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the Delete resource reclaimed", func() bool { _, found := getResource(t, deleted.Name); return !found })
	waitFor(t, 30*time.Second, "the Retain resource Released", func() bool {
		got, found := getResource(t, retained.Name)
		return found && got.Status.Phase == v1alpha1.ResourceReleased
	})
	if _, destroys := runs.counts(deleted.Name); destroys != 1 {
		t.Errorf("Delete: %d destroys; want one", destroys)
	}
	if _, destroys := runs.counts(retained.Name); destroys != 0 {
		t.Errorf("Retain: %d destroys; want none", destroys)
	}
	if _, found, err := statebackend.NewStore(envKube, envStateNamespace).For(state.Suffix(retained)).Status(ctx); err != nil || !found {
		t.Errorf("Retain: the state Secret found %v, %v; want it kept", found, err)
	}
	// The retained resource is deleted by a person at last: Retain orphans the state, destroys nothing.
	if err := envClient.Delete(ctx, retained); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the retained resource deleted", func() bool { _, found := getResource(t, retained.Name); return !found })
	if _, destroys := runs.counts(retained.Name); destroys != 0 {
		t.Errorf("Retain, deleted: %d destroys; want none", destroys)
	}
}
