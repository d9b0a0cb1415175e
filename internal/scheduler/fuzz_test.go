package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// maxClaimInputCost bounds the time one claim's input may take through decoding, matching and
// rendering (issue 18: a storage request of "1e-199999999" cost seconds of CPU, and stalled every
// other claim).
const maxClaimInputCost = 50 * time.Millisecond

// FuzzClaimInput feeds a tenant's claim input — a storage request (as a JSON string or number), a
// requirement, a selector's label value and a parameter — through what the controller does with
// it: decoding the claim as its cache does, the scheduler's matcher against a resource, and a
// class's templates. Nothing may panic, and nothing may take more than maxClaimInputCost: an input
// over it is tried twice more and fails only if the fastest of the three is still over, since a
// slow input is slow every time and a GC pause or a busy core once (seen: 101 ms once, on an input
// that takes well under 1 ms).
// make test runs it for a bounded time (FUZZTIME); the corpus is in testdata/fuzz/FuzzClaimInput.
func FuzzClaimInput(f *testing.F) {
	for _, seed := range []struct {
		q, key, value, label, param string
		number                      bool
	}{
		{"10Gi", "engine", "mysql", "dev", "03:00", false},
		{"1e1.5", "version", ">= 5.6", "prod", "x", false},
		{"1e-199999999", "version", "~1.2.3 || >= 2", "", "", false},
		{"123", "version", "banana", "a", "${claim.name}", true},
		{"-1", "", "", "-", `"`, false},
		{"9999999999999999999999999999Ei", "k", "1.x", "ok", "%{ if true }x%{ endif }", false},
		// A parameter read as a quantity (issue 33: 1e2000000000 made the controller compute it).
		{"1Gi", "k", "v", "dev", "1e2000000000", false},
		{"1Gi", "k", "v", "dev", "1e-2000000000", false},
	} {
		f.Add(seed.q, seed.number, seed.key, seed.value, seed.label, seed.param)
	}
	// A class's templates over the claim's request and parameters, as the controller renders them
	// (controller.RenderVariables: the claim's spec as JSON, render.Context, Render).
	tmpl, err := render.Compile(map[string][]byte{
		"storage_gib": []byte(`"${gibibytes(claim.spec.resources.requests.storage)}"`),
		"name":        []byte(`"${claim.namespace}-${claim.name}-${claim.spec.parameters.p}"`),
		"param_gib":   []byte(`"${gibibytes(claim.spec.parameters.p)}"`),
	})
	if err != nil {
		f.Fatal(err)
	}
	res := v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{"env": "dev"}},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "Db", Capacity: v1alpha1.Quantities{"storage": resource.MustParse("100Gi")},
			Capabilities: map[string]string{"engine": "mysql", "version": "8.0.35"}},
		Status: v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceAvailable},
	}
	f.Fuzz(func(t *testing.T, quantity string, number bool, key, value, label, param string) {
		q, _ := json.Marshal(quantity)
		if number {
			q = []byte(quantity)
		}
		p, _ := json.Marshal(param)
		k, _ := json.Marshal(key)
		v, _ := json.Marshal(value)
		l, _ := json.Marshal(label)
		doc := `{"apiVersion":"conductor.io/v1alpha1","kind":"InfraClaim","metadata":{"name":"c","namespace":"team"},` +
			`"spec":{"resourceKind":"Db","resources":{"requests":{"storage":` + string(q) + `}},` +
			`"requirements":{` + string(k) + `:` + string(v) + `},"selector":{"matchLabels":{"env":` + string(l) + `}},` +
			`"parameters":{"p":` + string(p) + `}}}`
		claimInput := func() time.Duration {
			start := time.Now()
			var claim v1alpha1.InfraClaim
			if err := json.Unmarshal([]byte(doc), &claim); err != nil {
				if json.Valid([]byte(doc)) {
					t.Fatalf("a claim the API server could store does not decode: %v\n%s", err, doc)
				}
				return time.Since(start)
			}
			if m, err := scheduler.NewMatcher(&claim); err == nil {
				m.Fits(&res)
				m.Best([]v1alpha1.InfraResource{res})
				if spec, err := json.Marshal(claim.Spec); err == nil {
					if ctx, err := render.Context(render.Claim{Name: claim.Name, Namespace: claim.Namespace, Spec: spec}, render.Class{Name: "fuzz"}, render.Resource{Name: "fuzz-1a2b3"}); err == nil {
						_, _ = tmpl.Render(ctx)
					}
				}
			}
			return time.Since(start)
		}
		took := claimInput()
		for try := 0; try < 2 && took > maxClaimInputCost; try++ {
			took = min(took, claimInput())
		}
		if took > maxClaimInputCost {
			t.Fatalf("claim input took %s, the fastest of three (over %s):\n%s", took, maxClaimInputCost, doc)
		}
	})
}
