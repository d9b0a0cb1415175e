package resource

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// A run still waiting for its slot when the bucket begins to be handed over gives its place up
// (its context ends with errHandedOver, and a late Started is refused); one that started first
// runs on whatever the handover.
func TestRunGivesItsPlaceUpOnHandover(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		handover := make(chan struct{})
		s := &resourceScope{handover: handover}
		ctx, stop := s.untilHandover(context.Background())
		defer stop()
		close(handover)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting run's context did not end at the handover")
		}
		if !errors.Is(context.Cause(ctx), errHandedOver) {
			t.Errorf("cause %v, want errHandedOver", context.Cause(ctx))
		}
		if err := s.startRun(); !errors.Is(err, errHandedOver) {
			t.Errorf("Started after the handover: %v, want errHandedOver", err)
		}
		if err := s.handedOver(ctx.Err()); !errors.Is(err, errHandedOver) || !errors.Is(err, context.Canceled) {
			t.Errorf("the run's error is %v, want errHandedOver (a cancellation)", err)
		}
	})
	t.Run("started", func(t *testing.T) {
		handover := make(chan struct{})
		s := &resourceScope{handover: handover}
		ctx, stop := s.untilHandover(context.Background())
		defer stop()
		if err := s.startRun(); err != nil {
			t.Fatal(err)
		}
		close(handover)
		time.Sleep(100 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("a started run was cancelled by the handover")
		}
		if err := s.handedOver(errors.New("apply failed")); errors.Is(err, errHandedOver) {
			t.Error("a started run's own error was turned into errHandedOver")
		}
	})
	t.Run("no sharding", func(t *testing.T) {
		s := &resourceScope{}
		ctx := context.Background()
		got, stop := s.untilHandover(ctx)
		defer stop()
		if got != ctx || s.startRun() != nil {
			t.Fatal("without sharding the run's context and start are untouched")
		}
	})
}

// Issue 51 (seen on kind with three sharded replicas: a resource deleted the second it was
// created): the claim controller that created a resource may be another replica's, whose claim
// this replica's cache has not seen yet. The cache alone says the claim is gone; the API server
// says it is live, and a resource is Released (and deleted) only when the API server agrees.
func TestClaimNotYetCachedIsNotGone(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db", UID: "u1"}}
	cache := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).Build()
	res := &v1alpha1.InfraResource{Spec: v1alpha1.InfraResourceSpec{ClaimRef: &v1alpha1.ClaimReference{Namespace: "team", Name: "db", UID: "u1"}}}
	ctx := context.Background()
	if got, err := observeClaim(ctx, cache, nil, res); err != nil || got != claimGone {
		t.Fatalf("the cache alone: %v, %v; want claimGone (what the resource was deleted on)", got, err)
	}
	if got, err := observeClaim(ctx, cache, live, res); err != nil || got != claimLive {
		t.Fatalf("confirmed with the API server: %v, %v; want claimLive", got, err)
	}
	if got, err := observeClaim(ctx, cache, cache, res); err != nil || got != claimGone {
		t.Fatalf("gone from both: %v, %v; want claimGone", got, err)
	}
	// A claim of another UID in the cache (deleted and created again) is checked too.
	stale := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "db", UID: "u0"}}).Build()
	if got, err := observeClaim(ctx, stale, live, res); err != nil || got != claimLive {
		t.Fatalf("an older claim in the cache: %v, %v; want claimLive", got, err)
	}
}
