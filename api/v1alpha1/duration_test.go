package v1alpha1_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 65 item 5: one claim's lifetime that Go cannot hold failed the decoding of the whole list,
// which is what the controller's cache lists (every claim of every namespace stalled). It now
// decodes, keeps the value as written, and says what it cannot read.
func TestAListWithAnUnreadableDurationDecodes(t *testing.T) {
	list := `{"items":[
		{"metadata":{"name":"bad"},"spec":{"resourceKind":"Store","lifetime":"9999999h"}},
		{"metadata":{"name":"number"},"spec":{"resourceKind":"Store","lifetime":12}},
		{"metadata":{"name":"good"},"spec":{"resourceKind":"Store","lifetime":"72h"}}]}`
	var claims v1alpha1.InfraClaimList
	if err := json.Unmarshal([]byte(list), &claims); err != nil {
		t.Fatalf("decoding a list with one unreadable lifetime: %v", err)
	}
	bad, number, good := claims.Items[0].Spec.Lifetime, claims.Items[1].Spec.Lifetime, claims.Items[2].Spec.Lifetime
	if bad.Unparsed != `"9999999h"` || bad.Parsed() != 0 || number.Unparsed != "12" {
		t.Fatalf("unreadable lifetimes kept as %q and %q (parsed %s); want them as written, parsed 0", bad.Unparsed, number.Unparsed, bad.Parsed())
	}
	if good.Unparsed != "" || good.Parsed() != 72*time.Hour {
		t.Fatalf("72h read as %s (unparsed %q)", good.Parsed(), good.Unparsed)
	}
	if p := bad.Problem("spec.lifetime"); !strings.Contains(p, `spec.lifetime: "9999999h" is not a duration`) || !strings.Contains(p, "invalid duration") {
		t.Fatalf("problem: %q", p)
	}
	if p := good.Problem("spec.lifetime"); p != "" {
		t.Fatalf("a read duration has a problem: %q", p)
	}
	var unset *v1alpha1.Duration
	if unset.Problem("spec.lifetime") != "" || unset.Parsed() != 0 {
		t.Fatal("an unset duration has a problem or a length")
	}

	// Written back, every value is as its author wrote it, and a read one as metav1.Duration writes it.
	for i, want := range []string{`"9999999h"`, `12`, `"72h0m0s"`} {
		b, err := json.Marshal(claims.Items[i].Spec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"lifetime":`+want) {
			t.Fatalf("item %d written as %s; want lifetime %s", i, b, want)
		}
	}
	ours, _ := json.Marshal(v1alpha1.Duration{Duration: 90 * time.Minute})
	theirs, _ := json.Marshal(metav1.Duration{Duration: 90 * time.Minute})
	if string(ours) != string(theirs) {
		t.Fatalf("written as %s; metav1.Duration writes %s", ours, theirs)
	}

	// The unstructured converter (server-side apply, the fake client) takes the same path.
	obj := map[string]any{"spec": map[string]any{"resourceKind": "Store", "lifetime": "9999999h"}}
	var claim v1alpha1.InfraClaim
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &claim); err != nil || claim.Spec.Lifetime.Unparsed != `"9999999h"` {
		t.Fatalf("from unstructured: %v, %+v", err, claim.Spec.Lifetime)
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&claim)
	if err != nil || back["spec"].(map[string]any)["lifetime"] != "9999999h" {
		t.Fatalf("to unstructured: %v, %v", err, back["spec"])
	}
}
