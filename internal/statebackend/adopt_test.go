package statebackend

import (
	"bytes"
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOrphanAndAdoptChunkedState moves a state of several chunks from one resource to another.
func TestOrphanAndAdoptChunkedState(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	big := stateJSON(t, "lin-a", 4, map[string]int{"big": 3 << 20})
	if err := writeStateJSON(ctx, testKube, ns, "default", "old", map[string]string{LabelResource: "old"}, big); err != nil {
		t.Fatal(err)
	}
	if err := orphan(ctx, testKube, ns, "default", "old", "old"); err != nil {
		t.Fatal(err)
	}
	for name := range chunkSecrets(t, ns, "old") {
		s, _ := testKube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if s.Labels[LabelOrphanedFrom] != "old" || s.Labels[LabelResource] != "" {
			t.Errorf("orphaned chunk %s labels %v", name, s.Labels)
		}
	}
	// The new resource's empty state is replaced; a chunked one with resources would refuse.
	if err := writeStateJSON(ctx, testKube, ns, "default", "new", nil, stateJSON(t, "lin-n", 1, nil)); err != nil {
		t.Fatal(err)
	}
	if err := adopt(ctx, testKube, ns, "tfstate-default-old", "default", "new", "new", nil); err != nil {
		t.Fatal(err)
	}
	got, found, err := readStateJSON(ctx, testKube, ns, "default", "new")
	if err != nil || !found || !bytes.Equal(got, big) {
		t.Fatalf("adopted state: found=%v err=%v equal=%v", found, err, bytes.Equal(got, big))
	}
	if cs := chunkSecrets(t, ns, "old"); len(cs) != 0 {
		t.Errorf("chunks of the adopted state left behind: %v", cs)
	}
	for name := range chunkSecrets(t, ns, "new") {
		s, _ := testKube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if s.Labels[LabelResource] != "new" {
			t.Errorf("adopted chunk %s labels %v", name, s.Labels)
		}
	}
	if err := adopt(ctx, testKube, ns, "tfstate-default-old", "default", "new", "new", nil); err != nil {
		t.Errorf("adopting again (finished): %v", err)
	}

	// A chunked state with resources is never replaced by an adoption.
	if err := writeStateJSON(ctx, testKube, ns, "default", "third", map[string]string{LabelOrphanedFrom: "third"}, stateJSON(t, "lin-t", 1, nil)); err != nil {
		t.Fatal(err)
	}
	var adoptErr *AdoptError
	if err := adopt(ctx, testKube, ns, "tfstate-default-third", "default", "new", "new", nil); !errors.As(err, &adoptErr) {
		t.Errorf("adopting over a chunked state with resources: %v", err)
	}
	if got, _, _ := readStateJSON(ctx, testKube, ns, "default", "new"); !bytes.Equal(got, big) {
		t.Error("the refused adoption changed the state")
	}
}
