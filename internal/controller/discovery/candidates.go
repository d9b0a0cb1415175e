package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// CandidatesOutput is the discovery module's output that lists what it found.
const CandidatesOutput = "candidates"

// MaxCandidates bounds one listing: a listing of more is refused (DiscoveryFailed), so that a
// discovery module that matches too much never floods the cluster with resources.
const MaxCandidates = 5000

// Candidate is one object a discovery module listed (an element of its `candidates` output).
type Candidate struct {
	// ID is stable and unique per object (e.g. "namespace/name", a cloud's ARN).
	ID string `json:"id"`
	// ImportIDs are the class module's resource addresses to the IDs Terraform's import takes.
	ImportIDs map[string]string `json:"import_ids"`
	// Variables are the class module's input variables that describe the object as it is.
	Variables map[string]json.RawMessage `json:"variables"`
	// Capacity are quantities by name ("storage": "10Gi"); Capabilities strings by name.
	Capacity     map[string]string `json:"capacity,omitempty"`
	Capabilities map[string]string `json:"capabilities,omitempty"`
}

// ParseCandidates reads the `candidates` output as the listing's connection Secret holds it (JSON:
// a list of Candidate). It returns an error naming the first problem: not a list of objects, an
// empty or repeated id, no import_ids, an import address or ID outside 1..1024 characters, a
// capacity that is not a quantity, or more than MaxCandidates.
func ParseCandidates(raw []byte) ([]Candidate, error) {
	var list []Candidate
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("output %s is not a list of candidates (id, import_ids, variables): %v", CandidatesOutput, err)
	}
	if len(list) > MaxCandidates {
		return nil, fmt.Errorf("output %s lists %d candidates, more than %d", CandidatesOutput, len(list), MaxCandidates)
	}
	seen := make(map[string]bool, len(list))
	var errs []error
	for i, c := range list {
		switch {
		case c.ID == "":
			errs = append(errs, fmt.Errorf("candidate %d has no id", i))
		case seen[c.ID]:
			errs = append(errs, fmt.Errorf("candidate id %q is listed twice", c.ID))
		case len(c.ImportIDs) == 0:
			errs = append(errs, fmt.Errorf("candidate %q has no import_ids: nothing could adopt it", c.ID))
		}
		seen[c.ID] = true
		for addr, id := range c.ImportIDs {
			if len(addr) == 0 || len(addr) > 1024 || len(id) == 0 || len(id) > 1024 {
				errs = append(errs, fmt.Errorf("candidate %q: import_ids[%q] = %q: address and ID must be 1 to 1024 characters", c.ID, addr, id))
			}
		}
		for k, v := range c.Capacity {
			if _, err := resource.ParseQuantity(v); err != nil {
				errs = append(errs, fmt.Errorf("candidate %q: capacity %s=%q is not a quantity", c.ID, k, v))
			}
		}
		if len(errs) > 0 {
			return nil, errs[0]
		}
	}
	return list, nil
}

// ResourceName is the name of the resource a class's discovery makes for candidate id: the class's
// name (cut to 200 characters) and 10 hex characters of the SHA-256 of the id. Stable across
// listings, and distinct per id (a collision of 40 bits among one class's candidates is refused by
// the create: AlreadyExists for another id).
func ResourceName(class, id string) string {
	sum := sha256.Sum256([]byte(id))
	if len(class) > 200 {
		class = strings.TrimRight(class[:200], "-.")
	}
	return class + "-" + hex.EncodeToString(sum[:5])
}

// ListingName is the name of the resource that runs a class's discovery module.
func ListingName(class string) string {
	if len(class) > 240 {
		class = strings.TrimRight(class[:240], "-.")
	}
	return "discovery-" + class
}

// desired is the resource class's discovery makes of c: of the class's kind and module, its
// variables and imports those of the listing, capacity from the listing, capabilities the class's
// and the listing's, reclaim policy Retain (nobody created it here), the class's run inputs,
// namespaces and operations.
func desired(class *v1alpha1.InfraClass, c Candidate) *v1alpha1.InfraResource {
	res := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name: ResourceName(class.Name, c.ID),
			Labels: map[string]string{
				v1alpha1.LabelDiscoveredBy: v1alpha1.LabelValue(class.Name),
				v1alpha1.LabelClass:        v1alpha1.LabelValue(class.Name),
			},
			Annotations: map[string]string{v1alpha1.AnnotationDiscoveryID: c.ID},
		},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind:      class.Spec.ResourceKind,
			ClassRef:          &v1alpha1.ClassReference{Name: class.Name},
			AllowedNamespaces: class.Spec.AllowedNamespaces.DeepCopy(),
			Module:            class.Spec.Module,
			RunInputs:         *class.Spec.RunInputs.DeepCopy(),
			Capabilities:      maps.Clone(class.Spec.Capabilities),
			ReclaimPolicy:     v1alpha1.ReclaimRetain,
			Operations:        class.Spec.Operations,
		},
	}
	// The class's generated passwords are for what it provisions; a discovered object keeps its own.
	res.Spec.GeneratedPasswords = nil
	if len(c.Variables) > 0 {
		res.Spec.Variables = make(v1alpha1.Variables, len(c.Variables))
		for k, v := range c.Variables {
			res.Spec.Variables[k] = apiextensionsv1.JSON{Raw: v}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(c.ImportIDs)) {
		res.Spec.Import = append(res.Spec.Import, v1alpha1.ImportTarget{Address: addr, ID: c.ImportIDs[addr]})
	}
	res.Spec.ImportIdentities = maps.Clone(c.ImportIDs)
	if len(c.Capacity) > 0 {
		res.Spec.Capacity = v1alpha1.Quantities{}
		for k, v := range c.Capacity {
			res.Spec.Capacity[k] = resource.MustParse(v) // ParseCandidates checked it
		}
	}
	if len(c.Capabilities) > 0 {
		if res.Spec.Capabilities == nil {
			res.Spec.Capabilities = map[string]string{}
		}
		maps.Copy(res.Spec.Capabilities, c.Capabilities)
	}
	return res
}

// errNotListed is the error of a listing that has not published candidates yet.
var errNotListed = errors.New("the listing has not run yet")
