package v1alpha1

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxQuantityLength bounds the text of a claim's request (characters).
const MaxQuantityLength = 64

// RequestPattern is the quantity format a claim's request may use: resource.ParseQuantity's, with
// an exponent of at most 3 digits and no sign but "+", so that parsing costs microseconds and the
// value is never negative (ParseQuantity accepts "1e-199999999" and takes minutes over it; the API
// server's own quantity pattern lets through "1e1.5", which ParseQuantity rejects). The CRD
// schema checks it at admission (hack/crdpatch writes it into the generated schema).
const RequestPattern = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]{1,3}))?$`

var boundedQuantity = regexp.MustCompile(RequestPattern)

// ParseRequest parses one request of a claim from its JSON value (a string or a number) with a bound
// on cost: at most MaxQuantityLength characters of the bounded quantity format, then
// resource.ParseQuantity. It returns an error that quotes the value (truncated) otherwise.
func ParseRequest(raw json.RawMessage) (resource.Quantity, error) {
	text := strings.TrimSpace(string(raw))
	var s string
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(raw, &s); err != nil {
			return resource.Quantity{}, fmt.Errorf("not a quantity: %v", err)
		}
	} else {
		s = text
	}
	shown := s
	if len(shown) > MaxQuantityLength {
		shown = shown[:MaxQuantityLength] + "…"
	}
	if len(s) > MaxQuantityLength {
		return resource.Quantity{}, fmt.Errorf("%q is longer than %d characters", shown, MaxQuantityLength)
	}
	if !boundedQuantity.MatchString(s) {
		return resource.Quantity{}, fmt.Errorf("%q is not a non-negative quantity (digits, an optional fraction, and a suffix such as Gi, G or e3)", shown)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q: %v", shown, err)
	}
	return q, nil
}

// UnmarshalJSON reads a claim's resources without failing on a request that is not a quantity:
// such a request is kept, as written, in Unparsed (the claim then says InvalidRequest), so that one
// claim's bad input never makes the claims list undecodable for the controller's cache, which would
// stall every claim of every namespace.
func (r *ClaimResources) UnmarshalJSON(b []byte) error {
	var raw struct {
		Requests map[string]json.RawMessage `json:"requests"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = ClaimResources{}
	for name, v := range raw.Requests {
		q, err := ParseRequest(v)
		if err != nil {
			if r.Unparsed == nil {
				r.Unparsed = map[string]string{}
			}
			r.Unparsed[name] = string(v)
			continue
		}
		if r.Requests == nil {
			r.Requests = Quantities{}
		}
		r.Requests[name] = q
	}
	return nil
}

// MarshalJSON writes Requests and, as they were read, the Unparsed requests: a write of the claim
// never loses what its author wrote.
func (r ClaimResources) MarshalJSON() ([]byte, error) {
	if len(r.Requests) == 0 && len(r.Unparsed) == 0 {
		return []byte("{}"), nil
	}
	out := make(map[string]json.RawMessage, len(r.Requests)+len(r.Unparsed))
	for name, q := range r.Requests {
		b, err := q.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	for name, v := range r.Unparsed {
		out[name] = json.RawMessage(v)
	}
	return json.Marshal(struct {
		Requests map[string]json.RawMessage `json:"requests"`
	}{out})
}

// RequestProblems describes the claim's requests that are not quantities, sorted, joined with "; "
// ("" when there is none).
func (r ClaimResources) RequestProblems() string {
	var msgs []string
	for name, v := range r.Unparsed {
		_, err := ParseRequest(json.RawMessage(v))
		msgs = append(msgs, fmt.Sprintf("resources.requests.%s: %v", name, err))
	}
	slices.Sort(msgs)
	return strings.Join(msgs, "; ")
}

// Storage returns a copy of the "storage" quantity (zero when absent).
func (q Quantities) Storage() resource.Quantity {
	return q["storage"].DeepCopy()
}
