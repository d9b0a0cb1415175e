package scheduler

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }
func qp(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

// price is a fixed monthly price and, when perGi is not "", a storage price per GiB.
func price(monthly, perGi string) *v1alpha1.ClassPrice {
	p := &v1alpha1.ClassPrice{}
	if monthly != "" {
		p.Monthly = qp(monthly)
	}
	if perGi != "" {
		p.PerUnit = []v1alpha1.UnitPrice{{Resource: "storage", Unit: q("1Gi"), Monthly: q(perGi)}}
	}
	return p
}

func TestMonthlyCost(t *testing.T) {
	cases := []struct {
		name     string
		price    *v1alpha1.ClassPrice
		capacity v1alpha1.Quantities
		want     string // "" for unknown (no price)
	}{
		{"no price is unknown, not zero", nil, v1alpha1.Quantities{"storage": q("10Gi")}, ""},
		{"a fixed price alone", price("12.50", ""), v1alpha1.Quantities{"storage": q("10Gi")}, "12.50"},
		{"per GiB of storage", price("", "0.10"), v1alpha1.Quantities{"storage": q("20Gi")}, "2.00"},
		{"fixed plus per unit", price("5", "0.25"), v1alpha1.Quantities{"storage": q("10Gi")}, "7.50"},
		{"a fraction of a unit counts its share", price("", "1"), v1alpha1.Quantities{"storage": q("512Mi")}, "0.50"},
		{"a capacity the price does not name costs nothing", price("3", ""), v1alpha1.Quantities{"cpu": q("4")}, "3.00"},
		{"a priced capacity the resource lacks counts nothing", price("3", "0.10"), nil, "3.00"},
		{"cents round half up", price("", "0.333"), v1alpha1.Quantities{"storage": q("1Gi")}, "0.33"},
		{"decimal units (1G) divide exactly", &v1alpha1.ClassPrice{PerUnit: []v1alpha1.UnitPrice{{Resource: "storage", Unit: q("1G"), Monthly: q("0.02")}}},
			v1alpha1.Quantities{"storage": q("500G")}, "10.00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ""
			if tc.price != nil && tc.price.Monthly != nil {
				before = tc.price.Monthly.String()
			}
			got, err := MonthlyCost(tc.price, tc.capacity)
			if err != nil {
				t.Fatal(err)
			}
			if s := FormatCost(got); s != tc.want {
				t.Fatalf("cost %q, want %q", s, tc.want)
			}
			if tc.price != nil && tc.price.Monthly != nil && tc.price.Monthly.String() != before {
				t.Fatalf("the price was rewritten: %s, was %s", tc.price.Monthly.String(), before)
			}
		})
	}
}

func TestCheckPrice(t *testing.T) {
	cases := []struct {
		name  string
		price *v1alpha1.ClassPrice
		bad   string // "" when valid
	}{
		{"unpriced is valid", nil, ""},
		{"a usual price", price("10", "0.1"), ""},
		{"free is valid", price("0", "0"), ""},
		{"a negative monthly", price("-1", ""), "price.monthly -1 is negative"},
		{"a zero unit would divide by zero", &v1alpha1.ClassPrice{PerUnit: []v1alpha1.UnitPrice{{Resource: "storage", Unit: q("0"), Monthly: q("1")}}},
			"price.perUnit[storage].unit 0 is not above zero"},
		{"a capacity priced twice", &v1alpha1.ClassPrice{PerUnit: []v1alpha1.UnitPrice{
			{Resource: "storage", Unit: q("1Gi"), Monthly: q("1")}, {Resource: "storage", Unit: q("1G"), Monthly: q("1")}}},
			"price.perUnit prices storage twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPrice(tc.price)
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.bad || reasonOf(err) != v1alpha1.ReasonPriceInvalid {
				t.Fatalf("got %v, want %s (PriceInvalid)", err, tc.bad)
			}
			if _, err := MonthlyCost(tc.price, v1alpha1.Quantities{"storage": q("1Gi")}); err == nil {
				t.Fatal("MonthlyCost computed a price CheckPrice refuses")
			}
		})
	}
}

func reasonOf(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Reason
	}
	return ""
}

// pclass is a class of kind Database with options.
func pclass(name string, opts ...func(*v1alpha1.InfraClass)) v1alpha1.InfraClass {
	c := v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "Database", Capabilities: map[string]string{"engine": "mysql"}}}
	for _, o := range opts {
		o(&c)
	}
	return c
}
func priced(monthly, perGi string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) { c.Spec.Price = price(monthly, perGi) }
}
func inZone(z string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) { c.Spec.Capabilities[v1alpha1.TopologyZone] = z }
}
func isDefault(c *v1alpha1.InfraClass) { c.Spec.Default = true }
func notReady(c *v1alpha1.InfraClass) {
	c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonModuleInvalid}}
}
func onlyFor(team string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) {
		c.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"team": team}}
	}
}
func offersEngine(e string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) { c.Spec.Capabilities["engine"] = e }
}

func cheapest(c *v1alpha1.InfraClaim) {
	c.Spec.Scheduling = &v1alpha1.ClaimScheduling{ClassSelection: v1alpha1.ClassSelectionCheapest}
}
func spreadZones(c *v1alpha1.InfraClaim) {
	if c.Spec.Scheduling == nil {
		c.Spec.Scheduling = &v1alpha1.ClaimScheduling{ClassSelection: v1alpha1.ClassSelectionDefault}
	}
	c.Spec.Scheduling.Spread = &v1alpha1.ClaimSpread{TopologyKey: v1alpha1.TopologyZone}
}

// TestChooseClass is the scheduler's choices of a class by cost and zone (issue 68), one row each.
func TestChooseClass(t *testing.T) {
	cases := []struct {
		name    string
		claim   *v1alpha1.InfraClaim
		classes []v1alpha1.InfraClass
		load    map[string]int // the spread group's resources per zone
		want    string         // the class chosen; "" for none
		wantErr string         // the reason of the error, if any
		why     string         // Choice.Why, when given
	}{
		{"without scheduling the kind's default, even when dearer", claim(),
			[]v1alpha1.InfraClass{pclass("dear", priced("50", ""), isDefault), pclass("cheap", priced("5", ""))}, nil, "dear", "", ""},
		{"Cheapest takes the lowest cost for the claim's requests", claim(cheapest, request("100Gi")),
			[]v1alpha1.InfraClass{pclass("fixed", priced("20", "")), pclass("per-gi", priced("", "0.25")), pclass("mixed", priced("10", "0.05"))},
			nil, "mixed", "", "class mixed; 15.00 a month"},
		{"Cheapest weighs the request: a small claim picks the per-GiB class", claim(cheapest, request("10Gi")),
			[]v1alpha1.InfraClass{pclass("fixed", priced("20", "")), pclass("per-gi", priced("", "0.25")), pclass("mixed", priced("10", "0.05"))},
			nil, "per-gi", "", "class per-gi; 2.50 a month"},
		{"Cheapest leaves out unpriced classes (unknown is not free)", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("unpriced"), pclass("priced", priced("99", ""))}, nil, "priced", "", ""},
		{"Cheapest leaves out classes whose requirements do not fit", claim(cheapest, require("engine", "postgres")),
			[]v1alpha1.InfraClass{pclass("mysql", priced("1", "")), pclass("pg", priced("9", ""), offersEngine("postgres"))}, nil, "pg", "", ""},
		{"Cheapest leaves out classes not offered to the namespace", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("theirs", priced("1", ""), onlyFor("b")), pclass("ours", priced("9", ""), onlyFor("a"))}, nil, "ours", "", ""},
		{"Cheapest leaves out a broken class", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("broken", priced("1", ""), notReady), pclass("ok", priced("9", ""))}, nil, "ok", "", ""},
		{"Cheapest leaves out a class whose price does not compute", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("bad", func(c *v1alpha1.InfraClass) {
				c.Spec.Price = &v1alpha1.ClassPrice{PerUnit: []v1alpha1.UnitPrice{{Resource: "storage", Unit: q("0"), Monthly: q("1")}}}
			}), pclass("ok", priced("9", ""))}, nil, "ok", "", ""},
		{"Cheapest: equal costs go to the default, then by name", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("b", priced("5", "")), pclass("c", priced("5", ""), isDefault), pclass("a", priced("5", ""))}, nil, "c", "", ""},
		{"Cheapest with no class that fits says why each was left out", claim(cheapest),
			[]v1alpha1.InfraClass{pclass("unpriced"), pclass("broken", priced("1", ""), notReady), pclass("bucket", priced("1", ""), func(c *v1alpha1.InfraClass) { c.Spec.ResourceKind = "Bucket" })},
			nil, "", v1alpha1.ReasonNoClassFits, ""},
		{"a spread takes the zone the group holds fewest in", claim(spreadZones),
			[]v1alpha1.InfraClass{pclass("in-a", inZone("a"), isDefault), pclass("in-b", inZone("b")), pclass("in-c", inZone("c"))},
			map[string]int{"a": 2, "b": 1, "c": 1}, "in-b", "", "class in-b; b holds 1 of the group's resources"},
		{"a spread before cost: the cheaper class's zone is full", claim(cheapest, spreadZones),
			[]v1alpha1.InfraClass{pclass("cheap-a", priced("1", ""), inZone("a")), pclass("dear-b", priced("9", ""), inZone("b"))},
			map[string]int{"a": 1}, "dear-b", "", ""},
		{"a spread, zones even: the cheapest", claim(cheapest, spreadZones),
			[]v1alpha1.InfraClass{pclass("dear-a", priced("9", ""), inZone("a")), pclass("cheap-b", priced("1", ""), inZone("b"))},
			map[string]int{"a": 1, "b": 1}, "cheap-b", "", ""},
		{"a spread, zones even, by Default: the default class", claim(spreadZones),
			[]v1alpha1.InfraClass{pclass("x-a", inZone("a")), pclass("y-b", inZone("b"), isDefault)}, nil, "y-b", "", ""},
		{"a spread leaves out classes that name no zone", claim(spreadZones),
			[]v1alpha1.InfraClass{pclass("nowhere", isDefault), pclass("in-a", inZone("a"))}, map[string]int{"a": 5}, "in-a", "", ""},
		{"a spread with no class naming a zone: NoClassFits", claim(spreadZones),
			[]v1alpha1.InfraClass{pclass("nowhere", isDefault)}, nil, "", v1alpha1.ReasonNoClassFits, ""},
		{"Default with no default class: nothing, no error (the claim waits)", claim(func(c *v1alpha1.InfraClaim) {
			c.Spec.Scheduling = &v1alpha1.ClaimScheduling{ClassSelection: v1alpha1.ClassSelectionDefault}
		}), []v1alpha1.InfraClass{pclass("x", priced("1", ""))}, nil, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMatcher(tc.claim)
			if err != nil {
				t.Fatal(err)
			}
			m.InNamespace(map[string]string{"team": "a"})
			if sp := tc.claim.Spec.Scheduling; sp != nil && sp.Spread != nil {
				m.Spread(sp.Spread.TopologyKey, tc.load)
			}
			got, err := m.ChooseClass(tc.classes)
			if tc.wantErr != "" {
				if reasonOf(err) != tc.wantErr {
					t.Fatalf("got %v, want reason %s", err, tc.wantErr)
				}
				t.Logf("%s: %v", tc.wantErr, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Class.Name
			}
			if name != tc.want {
				t.Fatalf("chose %q, want %q", name, tc.want)
			}
			if tc.why != "" && got.Why() != tc.why {
				t.Fatalf("why %q, want %q", got.Why(), tc.why)
			}
		})
	}
}

// TestBestSpread: with a spread, an Available resource in the zone the group holds fewest in binds
// before a smaller one elsewhere; one that names no zone comes last.
func TestBestSpread(t *testing.T) {
	zoned := func(z string) resOpt { return capability(v1alpha1.TopologyZone, z) }
	cases := []struct {
		name      string
		load      map[string]int
		resources []v1alpha1.InfraResource
		want      string
	}{
		{"the emptier zone before the smaller", map[string]int{"a": 1},
			[]v1alpha1.InfraResource{res("small-a", capacity("6Gi"), zoned("a")), res("big-b", capacity("50Gi"), zoned("b"))}, "big-b"},
		{"zones even: the smaller", map[string]int{"a": 1, "b": 1},
			[]v1alpha1.InfraResource{res("small-a", capacity("6Gi"), zoned("a")), res("big-b", capacity("50Gi"), zoned("b"))}, "small-a"},
		{"a resource that names no zone comes after every zoned one", map[string]int{"a": 3},
			[]v1alpha1.InfraResource{res("nowhere", capacity("6Gi")), res("in-a", capacity("50Gi"), zoned("a"))}, "in-a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMatcher(claim(spreadZones))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Spread(v1alpha1.TopologyZone, tc.load).Best(tc.resources); got == nil || got.Name != tc.want {
				t.Fatalf("bound %v, want %s", got, tc.want)
			}
		})
	}
}
