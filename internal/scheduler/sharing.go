package scheduler

import (
	"strconv"
	"strings"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Places of shared resources (a class's spec.sharing): which shared resource a claim's share goes
// into, and which place it takes. Places are names: the share taking place n of shared resource s
// is named v1alpha1.SharedPlace(s, n), so the API server, which refuses a second object of a name,
// is what keeps two claims out of one place; this choice only says which one to try.

// Shared is a shared resource and the places its shares take.
type Shared struct {
	Resource *v1alpha1.InfraResource
	// Taken are the places of its shares that exist (any phase, being reclaimed included: a
	// place is free once its share is gone).
	Taken []int
}

// GroupShares groups resources (a sharing class's shared resources, labelled
// conductor.io/shared-of, and shares, labelled conductor.io/share-of) into Shared values, one
// per shared resource, in the order of resources; a share whose name is no place of its shared
// resource (PlaceOf) takes none.
func GroupShares(resources []v1alpha1.InfraResource) []Shared {
	var out []Shared
	index := map[string]int{}
	for i := range resources {
		if res := &resources[i]; res.Labels[v1alpha1.LabelSharedOf] != "" {
			index[res.Name] = len(out)
			out = append(out, Shared{Resource: res})
		}
	}
	for i := range resources {
		res := &resources[i]
		of := res.Labels[v1alpha1.LabelShareOf]
		j, ok := index[of]
		if of == "" || !ok {
			continue
		}
		if n, ok := PlaceOf(of, res.Name); ok {
			out[j].Taken = append(out[j].Taken, n)
		}
	}
	return out
}

// PlaceOf is the place share takes of shared resource shared: n when share is named
// v1alpha1.SharedPlace(shared, n); false otherwise.
func PlaceOf(shared, share string) (int, bool) {
	rest, ok := strings.CutPrefix(share, shared+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// ChooseShared picks the shared resource a claim's share goes into, among shared, and the place
// it takes, for a class whose shared resources hold maxClaims claims each. Left out: a shared
// resource being deleted. Of the others with a free place (a place below maxClaims no share
// takes), the fullest is chosen (the fewest free places: claims are packed, so that emptied
// shared resources are reclaimed), then the first by name; the place is its lowest free one. It
// returns nil and -1 when no shared resource has a free place: the caller makes a new one.
func ChooseShared(shared []Shared, maxClaims int) (*v1alpha1.InfraResource, int) {
	var best *v1alpha1.InfraResource
	bestFree, bestPlace := 0, -1
	for _, s := range shared {
		if s.Resource.DeletionTimestamp != nil {
			continue
		}
		taken := map[int]bool{}
		for _, n := range s.Taken {
			taken[n] = true
		}
		free, place := 0, -1
		for n := 0; n < maxClaims; n++ {
			if !taken[n] {
				free++
				if place < 0 {
					place = n
				}
			}
		}
		if free == 0 {
			continue
		}
		if best == nil || free < bestFree || (free == bestFree && s.Resource.Name < best.Name) {
			best, bestFree, bestPlace = s.Resource, free, place
		}
	}
	return best, bestPlace
}
