package scheduler

import (
	"fmt"
	"strings"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// costScale is the number of decimal places costs are computed to (hundredths of a cent):
// proportional prices of fractions of a unit are rounded half up to it, then sums are exact.
const costScale = 4

// MonthlyCost is the estimated monthly cost of a resource of a class priced price with capacity
// (or, before provisioning, a claim's requests): price.monthly plus, for each priced capacity
// name the capacity has, capacity / unit × the unit's monthly price, to costScale places. A
// capacity the price does not name costs nothing; a price it names that the capacity lacks
// counts nothing. It returns nil for a nil price (unknown cost, which is not zero), and the error
// of CheckPrice for a price that cannot be computed. Amounts are in the cluster's one currency.
func MonthlyCost(price *v1alpha1.ClassPrice, capacity v1alpha1.Quantities) (*inf.Dec, error) {
	if price == nil {
		return nil, nil
	}
	if err := CheckPrice(price); err != nil {
		return nil, err
	}
	total := new(inf.Dec)
	if price.Monthly != nil {
		total.Add(total, dec(*price.Monthly))
	}
	for _, u := range price.PerUnit {
		have, ok := capacity[u.Resource]
		if !ok {
			continue
		}
		units := new(inf.Dec).QuoRound(dec(have), dec(u.Unit), costScale+6, inf.RoundHalfUp)
		part := new(inf.Dec).Mul(units, dec(u.Monthly))
		total.Add(total, part.Round(part, costScale, inf.RoundHalfUp))
	}
	return total.Round(total, costScale, inf.RoundHalfUp), nil
}

// CheckPrice says what is wrong with a class's price: a unit not above zero, a negative amount,
// or a capacity priced twice. It returns an *Error with reason PriceInvalid naming every problem,
// or nil. A nil price is valid (unpriced).
func CheckPrice(price *v1alpha1.ClassPrice) error {
	if price == nil {
		return nil
	}
	var problems []string
	if price.Monthly != nil && price.Monthly.Sign() < 0 {
		problems = append(problems, fmt.Sprintf("price.monthly %s is negative", price.Monthly.String()))
	}
	seen := map[string]bool{}
	for _, u := range price.PerUnit {
		if seen[u.Resource] {
			problems = append(problems, fmt.Sprintf("price.perUnit prices %s twice", u.Resource))
		}
		seen[u.Resource] = true
		if u.Unit.Sign() <= 0 {
			problems = append(problems, fmt.Sprintf("price.perUnit[%s].unit %s is not above zero", u.Resource, u.Unit.String()))
		}
		if u.Monthly.Sign() < 0 {
			problems = append(problems, fmt.Sprintf("price.perUnit[%s].monthly %s is negative", u.Resource, u.Monthly.String()))
		}
	}
	if len(problems) > 0 {
		return errorf(v1alpha1.ReasonPriceInvalid, "%s", strings.Join(problems, "; "))
	}
	return nil
}

// FormatCost writes a cost with two decimal places, rounded half up ("12.50"), as a claim's
// status.monthlyCost shows it; "" for nil.
func FormatCost(cost *inf.Dec) string {
	if cost == nil {
		return ""
	}
	return new(inf.Dec).Round(cost, 2, inf.RoundHalfUp).String()
}

// ParseAmount reads a decimal amount written as text (a Namespace's conductor.io/max-monthly-cost,
// "500" or "99.90") as a quantity parses it. It returns an error for text that is not a
// quantity, or a negative one.
func ParseAmount(s string) (*inf.Dec, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%q is not a decimal amount: %v", s, err)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("%q is negative", s)
	}
	return q.AsDec(), nil
}

// dec is q as a decimal, read from a copy: Quantity.AsDec rewrites the quantity it is called on,
// and prices live in objects the controller's cache shares.
func dec(q resource.Quantity) *inf.Dec {
	c := q.DeepCopy()
	return new(inf.Dec).Set(c.AsDec())
}
