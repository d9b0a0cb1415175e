package scheduler

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Choosing a class by cost and zone (spec.scheduling), where SelectClass takes the kind's default.

// Choice is the class ChooseClass picked, and why.
type Choice struct {
	Class *v1alpha1.InfraClass
	// Cost is the class's estimated monthly cost for the claim's requests (nil: unpriced).
	Cost *inf.Dec
	// Zone is the class's value of the spread's topology key ("" without a spread), and Load how
	// many resources of the claim's spread group are there already.
	Zone string
	Load int
}

// Why says the choice in words, for the claim's event ("class pg-small: 12.50 a month; zone a
// holds 0 of the group's resources").
func (c *Choice) Why() string {
	parts := []string{"class " + c.Class.Name}
	if c.Cost != nil {
		parts = append(parts, FormatCost(c.Cost)+" a month")
	}
	if c.Zone != "" {
		parts = append(parts, fmt.Sprintf("%s holds %d of the group's resources", c.Zone, c.Load))
	}
	return strings.Join(parts, "; ")
}

// Spread gives the matcher the load of the claim's spread group (spec.scheduling.spread): how many
// of the group's other resources are in each value of the topology key. Best then prefers an
// Available resource in the value that holds the fewest (a resource that names no value comes after
// every one that does), before the smallest. It returns m.
func (m *Matcher) Spread(topologyKey string, load map[string]int) *Matcher {
	m.spreadKey, m.load = topologyKey, load
	return m
}

// loadOf is the group's count in the topology value capabilities name; math.MaxInt when they name
// none, so that a resource or class nobody placed comes last.
func (m *Matcher) loadOf(capabilities map[string]string) int {
	zone, ok := capabilities[m.spreadKey]
	if !ok || zone == "" {
		return math.MaxInt
	}
	return m.load[zone]
}

// FitsClass reports whether a class could provision for the claim, with the reason when it could
// not: same kind, not being deleted, not broken (Ready False), offered to the claim's namespace
// (with InNamespace), and its capabilities meeting every requirement of the claim. The default
// class path (SelectClass) checks only the kind, as before scheduling existed.
func (m *Matcher) FitsClass(c *v1alpha1.InfraClass) (bool, string) {
	switch {
	case c.Spec.ResourceKind != m.claim.Spec.ResourceKind:
		return false, fmt.Sprintf("serves kind %s", c.Spec.ResourceKind)
	case c.DeletionTimestamp != nil:
		return false, "is being deleted"
	case m.nsLabels != nil && !AllowsNamespace(c.Spec.AllowedNamespaces, m.nsLabels):
		return false, "is not offered to namespace " + m.claim.Namespace
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); r != nil && r.Status == metav1.ConditionFalse {
		return false, "is not ready (" + r.Reason + ")"
	}
	for _, r := range m.requirements {
		if !r.satisfiedBy(c.Spec.Capabilities) {
			return false, fmt.Sprintf("capability %s=%q does not satisfy %q", r.key, c.Spec.Capabilities[r.key], r.value)
		}
	}
	return true, ""
}

// ChooseClass picks the class that provisions for a claim that names none, by its
// spec.scheduling. Without one, with classSelection Default and no spread, or for a claim that
// names its class, it is SelectClass
// (nil, nil when the kind has no default). Otherwise the candidates are the classes that fit
// (FitsClass), and with classSelection Cheapest only those with a price that computes; with a
// spread only those whose capabilities name the topology key. They are ordered by the group's load
// in their topology value (fewest first, with a spread), then by estimated monthly cost for the
// claim's requests (lowest first, with Cheapest), then the kind's default first, then name. It
// returns an *Error with reason NoClassFits naming why each class of the kind was left out when
// none is a candidate, and SelectClass's errors on its path.
func (m *Matcher) ChooseClass(classes []v1alpha1.InfraClass) (*Choice, error) {
	sched := m.claim.Spec.Scheduling
	if sched == nil || m.claim.Spec.ClassName != "" || (sched.ClassSelection != v1alpha1.ClassSelectionCheapest && sched.Spread == nil) {
		// A claim that names its class gets it (a spread then orders Available resources only).
		c, err := SelectClass(m.claim, classes)
		if c == nil || err != nil {
			return nil, err
		}
		return &Choice{Class: c}, nil
	}
	cheapest := sched.ClassSelection == v1alpha1.ClassSelectionCheapest
	var out []Choice
	var left []string
	for i := range classes {
		c := &classes[i]
		if c.Spec.ResourceKind != m.claim.Spec.ResourceKind {
			continue
		}
		if ok, why := m.FitsClass(c); !ok {
			left = append(left, c.Name+" "+why)
			continue
		}
		cost, err := MonthlyCost(c.Spec.Price, m.claim.Spec.Resources.Requests)
		if cheapest && (cost == nil || err != nil) {
			if err != nil {
				left = append(left, c.Name+" has a price that does not compute: "+err.Error())
			} else {
				left = append(left, c.Name+" has no price")
			}
			continue
		}
		ch := Choice{Class: c, Cost: cost}
		if sched.Spread != nil {
			ch.Zone = c.Spec.Capabilities[sched.Spread.TopologyKey]
			if ch.Zone == "" {
				left = append(left, fmt.Sprintf("%s names no %s", c.Name, sched.Spread.TopologyKey))
				continue
			}
			ch.Load = m.load[ch.Zone]
		}
		out = append(out, ch)
	}
	if len(out) == 0 {
		slices.Sort(left)
		msg := fmt.Sprintf("no class of kind %s fits the claim", m.claim.Spec.ResourceKind)
		if len(left) > 0 {
			msg += ": " + strings.Join(left, "; ")
		}
		return nil, errorf(v1alpha1.ReasonNoClassFits, "%s", msg)
	}
	slices.SortStableFunc(out, func(a, b Choice) int {
		if a.Load != b.Load {
			return a.Load - b.Load
		}
		if cheapest {
			if c := a.Cost.Cmp(b.Cost); c != 0 {
				return c
			}
		}
		if a.Class.Spec.Default != b.Class.Spec.Default {
			if a.Class.Spec.Default {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Class.Name, b.Class.Name)
	})
	return &out[0], nil
}
