// Package scheduler decides, without side effects, which InfraResource a claim binds to and which
// InfraClass provisions for it. It mirrors the PersistentVolume controller's binder
// (pkg/controller/volume/persistentvolume: findMatchingVolume in index.go and
// FindMatchingVolume in pkg/volume/util), with a claim's kind, class, selector, requirements and
// requests in place of a PVC's access modes, class, selector and storage request.
//
// It imports the API types only; the claim controller fetches, writes and records what it decides.
package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Error is a decision the user must see: a condition reason from the API and a message.
type Error struct {
	// Reason is one of the v1alpha1.Reason* constants.
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// requirement is one claim requirement, parsed once per claim.
type requirement struct {
	key        string
	value      string
	constraint *semver.Constraints // nil: the capability must equal value
}

// constraintOperators start a value that is meant as a semver constraint, which must then parse.
const constraintOperators = "<>=!~^"

// parseRequirement reads one requirement: a value that parses as a semver constraint is one
// (">= 5.6", "~8.0", "8.x", "5.6"); a value that starts with a constraint operator but does not
// parse is an error; any other value is matched by equality.
func parseRequirement(key, value string) (requirement, error) {
	r := requirement{key: key, value: value}
	v := strings.TrimSpace(value)
	c, err := semver.NewConstraint(v)
	switch {
	case err == nil:
		r.constraint = c
	case v != "" && strings.ContainsRune(constraintOperators, rune(v[0])):
		return r, errorf(v1alpha1.ReasonInvalidRequirement, "requirement %s: %q is not a valid semver constraint: %v", key, value, err)
	}
	return r, nil
}

func (r requirement) satisfiedBy(capabilities map[string]string) bool {
	have, ok := capabilities[r.key]
	if !ok {
		return false
	}
	if r.constraint == nil {
		return have == r.value
	}
	v, err := semver.NewVersion(have)
	if err != nil {
		return have == r.value
	}
	return r.constraint.Check(v)
}

// Matcher holds a claim's parsed selector and requirements, so that matching many resources parses
// them once. Build one with NewMatcher.
type Matcher struct {
	claim        *v1alpha1.InfraClaim
	selector     labels.Selector
	requirements []requirement
	requestKeys  []string
	// nsLabels are the labels of the claim's namespace, for resources' allowedNamespaces (nil:
	// not known, not checked).
	nsLabels labels.Set
	// classNamespaces are the allowedNamespaces of the classes resources were provisioned from,
	// by class name: a resource of a class not offered to the namespace is no candidate either.
	classNamespaces map[string]*metav1.LabelSelector
	// spreadKey and load are the claim's spread (Spread): the topology capability and the group's
	// resources per value of it.
	spreadKey string
	load      map[string]int
}

// InNamespace gives the matcher the labels of the claim's namespace: resources whose
// allowedNamespaces do not select it are then never candidates. It returns m.
func (m *Matcher) InNamespace(nsLabels map[string]string) *Matcher {
	m.nsLabels = labels.Set(nsLabels)
	if m.nsLabels == nil {
		m.nsLabels = labels.Set{}
	}
	return m
}

// WithClasses gives the matcher the classes, so that a resource of a class whose allowedNamespaces
// do not select the claim's namespace is never a candidate, even when the resource's own selector
// is empty (a static resource naming the class, or one provisioned before the field existed). It
// applies only with InNamespace. It returns m.
func (m *Matcher) WithClasses(classes []v1alpha1.InfraClass) *Matcher {
	m.classNamespaces = make(map[string]*metav1.LabelSelector, len(classes))
	for i := range classes {
		m.classNamespaces[classes[i].Name] = classes[i].Spec.AllowedNamespaces
	}
	return m
}

// AllowsNamespace reports whether allowed (a class's or resource's spec.allowedNamespaces) selects a
// namespace with these labels: nil selects every namespace; a selector that does not parse selects
// none (mirrors Gateway API's allowedRoutes.namespaces.selector).
func AllowsNamespace(allowed *metav1.LabelSelector, nsLabels map[string]string) bool {
	if allowed == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(allowed)
	return err == nil && sel.Matches(labels.Set(nsLabels))
}

// NewMatcher parses the claim's selector and requirements. It returns an *Error with reason
// InvalidRequest when a request is not a quantity (ClaimResources.Unparsed), and InvalidRequirement
// when a requirement or the selector does not parse.
func NewMatcher(claim *v1alpha1.InfraClaim) (*Matcher, error) {
	if problems := claim.Spec.Resources.RequestProblems(); problems != "" {
		return nil, errorf(v1alpha1.ReasonInvalidRequest, "%s", problems)
	}
	m := &Matcher{claim: claim}
	if claim.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil {
			return nil, errorf(v1alpha1.ReasonInvalidRequirement, "selector: %v", err)
		}
		m.selector = sel
	}
	for _, k := range slices.Sorted(maps.Keys(claim.Spec.Requirements)) {
		r, err := parseRequirement(k, claim.Spec.Requirements[k])
		if err != nil {
			return nil, err
		}
		m.requirements = append(m.requirements, r)
	}
	m.requestKeys = slices.Sorted(maps.Keys(claim.Spec.Resources.Requests))
	return m, nil
}

// IsPreBoundTo reports whether the resource's claimRef names this claim: same namespace and name,
// and the same UID unless the claimRef has none yet (mirrors IsVolumeBoundToClaim).
func IsPreBoundTo(res *v1alpha1.InfraResource, claim *v1alpha1.InfraClaim) bool {
	ref := res.Spec.ClaimRef
	if ref == nil || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
		return false
	}
	return ref.UID == "" || ref.UID == claim.UID
}

// Fits reports whether the resource could serve the claim, ignoring its phase and claimRef: same
// kind, the named class if the claim names one, capacity covering every request, labels matching
// the selector, capabilities meeting every requirement. When it does not, the reason says why.
func (m *Matcher) Fits(res *v1alpha1.InfraResource) (bool, string) {
	return m.check(res, true)
}

// check runs the cheap comparisons first; it formats a reason only when explain is set, so that
// Best allocates nothing for the resources it rejects.
func (m *Matcher) check(res *v1alpha1.InfraResource, explain bool) (bool, string) {
	spec := &m.claim.Spec
	fail := func(format string, args ...any) (bool, string) {
		if !explain {
			return false, ""
		}
		return false, fmt.Sprintf(format, args...)
	}
	if res.Spec.ResourceKind != spec.ResourceKind {
		return fail("resource is of kind %s, claim asks for %s", res.Spec.ResourceKind, spec.ResourceKind)
	}
	if m.nsLabels != nil && !AllowsNamespace(res.Spec.AllowedNamespaces, m.nsLabels) {
		return fail("resource is not offered to namespace %s", m.claim.Namespace)
	}
	if m.nsLabels != nil && res.Spec.ClassRef != nil && !AllowsNamespace(m.classNamespaces[res.Spec.ClassRef.Name], m.nsLabels) {
		return fail("resource's class %s is not offered to namespace %s", res.Spec.ClassRef.Name, m.claim.Namespace)
	}
	if spec.ClassName != "" && (res.Spec.ClassRef == nil || res.Spec.ClassRef.Name != spec.ClassName) {
		return fail("resource is not of class %s", spec.ClassName)
	}
	for _, k := range m.requestKeys {
		want := spec.Resources.Requests[k]
		have, ok := res.Spec.Capacity[k]
		if !ok || have.Cmp(want) < 0 {
			return fail("capacity %s=%s is less than the request %s", k, have.String(), want.String())
		}
	}
	if m.selector != nil && !m.selector.Matches(labels.Set(res.Labels)) {
		return fail("resource labels do not match the selector")
	}
	for _, r := range m.requirements {
		if !r.satisfiedBy(res.Spec.Capabilities) {
			return fail("capability %s=%q does not satisfy %q", r.key, res.Spec.Capabilities[r.key], r.value)
		}
	}
	return true, ""
}

// before reports whether Best prefers a to b: with a spread (Spread), the one in the topology value
// that holds fewer of the group's resources; then the smaller.
func (m *Matcher) before(a, b *v1alpha1.InfraResource) bool {
	if m.spreadKey != "" {
		if la, lb := m.loadOf(a.Spec.Capabilities), m.loadOf(b.Spec.Capabilities); la != lb {
			return la < lb
		}
	}
	return m.smaller(a, b)
}

// smaller reports whether a's capacity is smaller than b's, comparing the requested resources in
// name order, then the names, so that the choice is deterministic.
func (m *Matcher) smaller(a, b *v1alpha1.InfraResource) bool {
	for _, k := range m.requestKeys {
		qa, qb := a.Spec.Capacity[k], b.Spec.Capacity[k]
		if c := qa.Cmp(qb); c != 0 {
			return c < 0
		}
	}
	return a.Name < b.Name
}

// Best returns the resource the claim should bind to, or nil when none fits. It mirrors
// findMatchingVolume: resources being deleted are skipped; a resource pre-bound to this claim is
// returned if it fits, whatever its phase; otherwise only Available resources with no claimRef
// (and not in a class's ready pool, nor a class's discovery listing) are candidates, and the smallest that fits wins (with a
// spread, the one in the least loaded zone first: before).
func (m *Matcher) Best(resources []v1alpha1.InfraResource) *v1alpha1.InfraResource {
	var best *v1alpha1.InfraResource
	for i := range resources {
		res := &resources[i]
		if res.DeletionTimestamp != nil || res.Labels[v1alpha1.LabelDiscoveryOf] != "" || res.Labels[v1alpha1.LabelSharedOf] != "" {
			// A class's listing resource runs its discovery module, and a shared resource holds
			// its claims' shares: neither is any claim's.
			continue
		}
		if IsPreBoundTo(res, m.claim) {
			if ok, _ := m.check(res, false); ok {
				return res
			}
			continue
		}
		if res.Status.Phase != v1alpha1.ResourceAvailable || res.Spec.ClaimRef != nil || res.Labels[v1alpha1.LabelReadyPool] != "" ||
			res.Annotations[v1alpha1.AnnotationDiscoveryLost] != "" {
			// A member of a class's ready pool goes only to a claim of that class, rendered for it
			// (the claim reconciler's takeFromPool).
			continue
		}
		if ok, _ := m.check(res, false); !ok {
			continue
		}
		if best == nil || m.before(res, best) {
			best = res
		}
	}
	return best
}

// FindMatchingResource is NewMatcher followed by Best.
func FindMatchingResource(claim *v1alpha1.InfraClaim, resources []v1alpha1.InfraResource) (*v1alpha1.InfraResource, error) {
	m, err := NewMatcher(claim)
	if err != nil {
		return nil, err
	}
	return m.Best(resources), nil
}

// CheckStaticBinding says whether a claim may bind to the resource it names in spec.resourceName
// (mirrors syncUnboundClaim's checks for a claim with volumeName). It returns an *Error with reason
// ResourceBoundToOtherClaim when the resource is bound or pre-bound to another claim, and
// ResourceMismatch when it does not fit the claim.
func CheckStaticBinding(claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) error {
	if ref := res.Spec.ClaimRef; ref != nil && !IsPreBoundTo(res, claim) {
		// As the PV controller words it ("volume already bound to a different claim"): the other
		// claim, perhaps of another namespace, is not named to this one.
		return errorf(v1alpha1.ReasonResourceBoundToOtherClaim, "resource %s is bound or reserved to a different claim", res.Name)
	}
	if res.Labels[v1alpha1.LabelDiscoveryOf] != "" {
		return errorf(v1alpha1.ReasonResourceMismatch, "resource %s runs a class's discovery: no claim binds it", res.Name)
	}
	if res.Labels[v1alpha1.LabelSharedOf] != "" {
		return errorf(v1alpha1.ReasonResourceMismatch, "resource %s is shared by the claims of class %s: claim the class and a share of it is made", res.Name, res.Labels[v1alpha1.LabelSharedOf])
	}
	if (res.Status.Phase == v1alpha1.ResourceLost || res.Annotations[v1alpha1.AnnotationDiscoveryLost] != "") && res.Spec.ClaimRef == nil {
		return errorf(v1alpha1.ReasonResourceMismatch, "resource %s is Lost: its class's last discovery no longer found its object", res.Name)
	}
	if res.Labels[v1alpha1.LabelReadyPool] != "" && res.Spec.ClaimRef == nil {
		return errorf(v1alpha1.ReasonResourceMismatch, "resource %s is in a class's ready pool: claim the class (spec.className) and a ready one is bound", res.Name)
	}
	m, err := NewMatcher(claim)
	if err != nil {
		return err
	}
	if ok, why := m.Fits(res); !ok {
		return errorf(v1alpha1.ReasonResourceMismatch, "resource %s does not fit the claim: %s", res.Name, why)
	}
	return nil
}

// SelectClass picks the class that provisions for a claim: the class it names, else the single
// default class of its kind. It returns nil and no error when the claim names no class and its kind
// has no default (the claim waits for a matching resource). It returns an *Error with reason
// ClassNotFound, ClassKindMismatch or MultipleDefaultClasses otherwise.
func SelectClass(claim *v1alpha1.InfraClaim, classes []v1alpha1.InfraClass) (*v1alpha1.InfraClass, error) {
	kind := claim.Spec.ResourceKind
	if name := claim.Spec.ClassName; name != "" {
		for i := range classes {
			c := &classes[i]
			if c.Name != name {
				continue
			}
			if c.Spec.ResourceKind != kind {
				return nil, errorf(v1alpha1.ReasonClassKindMismatch, "class %s serves kind %s, not %s", name, c.Spec.ResourceKind, kind)
			}
			return c, nil
		}
		return nil, errorf(v1alpha1.ReasonClassNotFound, "class %s not found", name)
	}
	var defaults []*v1alpha1.InfraClass
	for i := range classes {
		if c := &classes[i]; c.Spec.Default && c.Spec.ResourceKind == kind && c.DeletionTimestamp == nil {
			defaults = append(defaults, c)
		}
	}
	switch len(defaults) {
	case 0:
		return nil, nil
	case 1:
		return defaults[0], nil
	default:
		names := make([]string, len(defaults))
		for i, c := range defaults {
			names[i] = c.Name
		}
		sort.Strings(names)
		return nil, errorf(v1alpha1.ReasonMultipleDefaultClasses, "kind %s has %d default classes (%s); name one in spec.className", kind, len(names), strings.Join(names, ", "))
	}
}
