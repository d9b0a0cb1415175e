package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// sharedRes is a shared resource named name; deleting marks it being deleted.
func sharedRes(name string, deleting bool) v1alpha1.InfraResource {
	r := v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelSharedOf: "db"}}}
	if deleting {
		now := metav1.Now()
		r.DeletionTimestamp = &now
	}
	return r
}

// shareRes is a share of shared named name.
func shareRes(shared, name string) v1alpha1.InfraResource {
	return v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelShareOf: shared}}}
}

// The binder's rules for shared resources, as a table: which shared resource a claim's share goes
// into and which place it takes.
func TestChooseShared(t *testing.T) {
	cases := []struct {
		name      string
		resources []v1alpha1.InfraResource
		max       int
		want      string // "" when a new shared resource must be made
		place     int
	}{
		{"no shared resource: a new one", nil, 3, "", -1},
		{"shares of an unknown shared resource take nothing", []v1alpha1.InfraResource{shareRes("gone", "gone-0")}, 3, "", -1},
		{"an empty shared resource: its place 0", []v1alpha1.InfraResource{sharedRes("a", false)}, 3, "a", 0},
		{"the lowest free place", []v1alpha1.InfraResource{sharedRes("a", false), shareRes("a", "a-0"), shareRes("a", "a-1")}, 3, "a", 2},
		{"a place freed below the others is taken first", []v1alpha1.InfraResource{sharedRes("a", false), shareRes("a", "a-1"), shareRes("a", "a-2")}, 3, "a", 0},
		{"a full shared resource: a new one", []v1alpha1.InfraResource{sharedRes("a", false), shareRes("a", "a-0"), shareRes("a", "a-1")}, 2, "", -1},
		{"the fullest with a free place (packed)", []v1alpha1.InfraResource{
			sharedRes("a", false), sharedRes("b", false), shareRes("b", "b-0"), shareRes("b", "b-2")}, 4, "b", 1},
		{"equally full: the first by name", []v1alpha1.InfraResource{
			sharedRes("b", false), sharedRes("a", false), shareRes("a", "a-0"), shareRes("b", "b-0")}, 2, "a", 1},
		{"a full one is passed over for one with room", []v1alpha1.InfraResource{
			sharedRes("a", false), shareRes("a", "a-0"), sharedRes("b", false)}, 1, "b", 0},
		{"one being deleted takes no claim", []v1alpha1.InfraResource{sharedRes("a", true), sharedRes("b", false), shareRes("b", "b-0")}, 3, "b", 1},
		{"only one being deleted: a new one", []v1alpha1.InfraResource{sharedRes("a", true)}, 3, "", -1},
		{"a share named as no place takes none", []v1alpha1.InfraResource{sharedRes("a", false), shareRes("a", "a-x"), shareRes("a", "a-01")}, 1, "a", 0},
		{"a share above the maximum (the maximum lowered) leaves the places below it", []v1alpha1.InfraResource{
			sharedRes("a", false), shareRes("a", "a-0"), shareRes("a", "a-5")}, 2, "a", 1},
		{"the maximum lowered under the shares: full", []v1alpha1.InfraResource{
			sharedRes("a", false), shareRes("a", "a-0"), shareRes("a", "a-1"), shareRes("a", "a-2")}, 2, "", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, place := ChooseShared(GroupShares(c.resources), c.max)
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != c.want || place != c.place {
				t.Fatalf("ChooseShared = %q place %d, want %q place %d", name, place, c.want, c.place)
			}
		})
	}
}

func TestPlaceOf(t *testing.T) {
	for share, want := range map[string]int{"db-shared-1a2b3-0": 0, "db-shared-1a2b3-17": 17, "db-shared-1a2b3-": -1,
		"db-shared-1a2b3-007": -1, "db-shared-1a2b3--1": -1, "other-0": -1, "db-shared-1a2b3-0x": -1} {
		n, ok := PlaceOf("db-shared-1a2b3", share)
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("PlaceOf(%s) = %d, want %d", share, n, want)
		}
	}
}

// TestSharedRaces races claims for the places of shared resources as the claim reconciler does:
// each claim chooses from what it last listed and creates its share under the chosen name, or a new
// shared resource when none has room; the API server (here a set of names) refuses a name taken,
// and the loser lists again. With the class's lock (one claim decides at a time) exactly
// ceil(claims/max) shared resources are made; without it (replicas of other shards deciding from
// the same listing) more may be, but in both no place is taken twice, no shared resource holds more
// than max claims, and every claim ends with one place.
func TestSharedRaces(t *testing.T) {
	for _, c := range []struct {
		claims, max int
		locked      bool
	}{{5, 2, true}, {7, 3, true}, {40, 4, true}, {5, 2, false}, {7, 3, false}, {40, 4, false}, {3, 1, false}, {12, 12, false}} {
		t.Run(fmt.Sprintf("%d claims, %d places, locked %v", c.claims, c.max, c.locked), func(t *testing.T) {
			for seed := range uint64(20) {
				raceShared(t, c.claims, c.max, c.locked, rand.New(rand.NewPCG(seed, 7)))
			}
		})
	}
}

func raceShared(t *testing.T, claims, max int, locked bool, rnd *rand.Rand) {
	t.Helper()
	names := map[string]bool{} // the API server's objects
	var objects []v1alpha1.InfraResource
	placed := map[int]string{} // claim → its share
	made := 0
	create := func(r v1alpha1.InfraResource) bool {
		if names[r.Name] {
			return false // AlreadyExists
		}
		names[r.Name] = true
		objects = append(objects, r)
		return true
	}
	for round := 0; len(placed) < claims; round++ {
		if round > 10*claims {
			t.Fatalf("claims not all placed after %d rounds: %d of %d", round, len(placed), claims)
		}
		var waiting []int
		for i := range claims {
			if _, ok := placed[i]; !ok {
				waiting = append(waiting, i)
			}
		}
		rnd.Shuffle(len(waiting), func(a, b int) { waiting[a], waiting[b] = waiting[b], waiting[a] })
		snapshot := GroupShares(append([]v1alpha1.InfraResource(nil), objects...))
		for _, i := range waiting {
			if locked {
				snapshot = GroupShares(append([]v1alpha1.InfraResource(nil), objects...)) // decided alone, on a fresh listing
			}
			shared, place := ChooseShared(snapshot, max)
			if shared == nil {
				made++
				create(sharedRes(fmt.Sprintf("s%03d", made), false))
				continue // its share is made on the next try, as the reconciler requeues
			}
			share := shareRes(shared.Name, v1alpha1.SharedPlace(shared.Name, place))
			if create(share) {
				placed[i] = share.Name
			}
		}
	}
	perShared := map[string]int{}
	seen := map[string]bool{}
	for _, name := range placed {
		if seen[name] {
			t.Fatalf("place %s taken twice", name)
		}
		seen[name] = true
	}
	for _, g := range GroupShares(objects) {
		perShared[g.Resource.Name] = len(g.Taken)
		if len(g.Taken) > max {
			t.Fatalf("shared resource %s holds %d claims, more than %d", g.Resource.Name, len(g.Taken), max)
		}
	}
	if want := (claims + max - 1) / max; locked && made != want {
		t.Fatalf("with the lock, %d shared resources made for %d claims of %d places, want %d (%v)", made, claims, max, want, perShared)
	}
}
