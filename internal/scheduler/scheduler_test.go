package scheduler

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

type resOpt func(*v1alpha1.InfraResource)

func res(name string, opts ...resOpt) v1alpha1.InfraResource {
	r := v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind: "Database",
			Capacity:     v1alpha1.Quantities{"storage": resource.MustParse("10Gi")},
			Capabilities: map[string]string{"engine": "mysql", "version": "8.0.35"},
		},
		Status: v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceAvailable},
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func capacity(q string) resOpt {
	return func(r *v1alpha1.InfraResource) { r.Spec.Capacity["storage"] = resource.MustParse(q) }
}
func kind(k string) resOpt { return func(r *v1alpha1.InfraResource) { r.Spec.ResourceKind = k } }
func class(c string) resOpt {
	return func(r *v1alpha1.InfraResource) { r.Spec.ClassRef = &v1alpha1.ClassReference{Name: c} }
}
func phase(p v1alpha1.ResourcePhase) resOpt {
	return func(r *v1alpha1.InfraResource) { r.Status.Phase = p }
}
func labelled(k, v string) resOpt {
	return func(r *v1alpha1.InfraResource) { r.Labels = map[string]string{k: v} }
}
func claimRef(ns, name, uid string) resOpt {
	return func(r *v1alpha1.InfraResource) {
		r.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: ns, Name: name, UID: types.UID(uid)}
	}
}
func capability(k, v string) resOpt {
	return func(r *v1alpha1.InfraResource) { r.Spec.Capabilities[k] = v }
}
func deleting() resOpt {
	return func(r *v1alpha1.InfraResource) { now := metav1.Now(); r.DeletionTimestamp = &now }
}

type claimOpt func(*v1alpha1.InfraClaim)

func claim(opts ...claimOpt) *v1alpha1.InfraClaim {
	c := &v1alpha1.InfraClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db", UID: "uid-1"},
		Spec: v1alpha1.InfraClaimSpec{
			ResourceKind: "Database",
			Resources:    v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("5Gi")}},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func request(q string) claimOpt {
	return func(c *v1alpha1.InfraClaim) { c.Spec.Resources.Requests["storage"] = resource.MustParse(q) }
}
func wantClass(n string) claimOpt { return func(c *v1alpha1.InfraClaim) { c.Spec.ClassName = n } }
func selector(k, v string) claimOpt {
	return func(c *v1alpha1.InfraClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
}
func require(k, v string) claimOpt {
	return func(c *v1alpha1.InfraClaim) {
		if c.Spec.Requirements == nil {
			c.Spec.Requirements = map[string]string{}
		}
		c.Spec.Requirements[k] = v
	}
}

func TestFindMatchingResource(t *testing.T) {
	cases := []struct {
		reason    string
		claim     *v1alpha1.InfraClaim
		resources []v1alpha1.InfraResource
		want      string // "" for no match
	}{
		{"an exact fit binds", claim(), []v1alpha1.InfraResource{res("a")}, "a"},
		{"the smallest resource that fits wins", claim(request("5Gi")),
			[]v1alpha1.InfraResource{res("big", capacity("100Gi")), res("small", capacity("6Gi")), res("mid", capacity("20Gi"))}, "small"},
		{"capacity too small never binds", claim(request("50Gi")),
			[]v1alpha1.InfraResource{res("a", capacity("10Gi")), res("b", capacity("49Gi"))}, ""},
		{"equal capacity picks by name, deterministically", claim(),
			[]v1alpha1.InfraResource{res("b"), res("a")}, "a"},
		{"a resource pre-bound to the claim wins over a smaller free one", claim(),
			[]v1alpha1.InfraResource{res("free", capacity("6Gi")), res("pre", capacity("50Gi"), claimRef("app", "db", ""))}, "pre"},
		{"a pre-bound resource wins whatever its phase (still provisioning)", claim(),
			[]v1alpha1.InfraResource{res("free"), res("pre", phase(v1alpha1.ResourceProvisioning), claimRef("app", "db", "uid-1"))}, "pre"},
		{"a pre-bound resource that is too small is skipped, as in the PV binder", claim(request("20Gi")),
			[]v1alpha1.InfraResource{res("pre", capacity("10Gi"), claimRef("app", "db", "")), res("free", capacity("30Gi"))}, "free"},
		{"a resource pre-bound to another claim is not a candidate", claim(),
			[]v1alpha1.InfraResource{res("other", claimRef("app", "other", ""))}, ""},
		{"a resource bound to an earlier claim of the same name (other UID) is not a candidate", claim(),
			[]v1alpha1.InfraResource{res("old", claimRef("app", "db", "uid-0"))}, ""},
		{"only Available resources are candidates", claim(),
			[]v1alpha1.InfraResource{res("r", phase(v1alpha1.ResourceReleased)), res("p", phase(v1alpha1.ResourcePending))}, ""},
		{"resources being deleted are skipped, even pre-bound", claim(),
			[]v1alpha1.InfraResource{res("pre", deleting(), claimRef("app", "db", ""))}, ""},
		{"another kind never binds", claim(), []v1alpha1.InfraResource{res("a", kind("Bucket"))}, ""},
		{"selector mismatch", claim(selector("env", "dev")),
			[]v1alpha1.InfraResource{res("prod", labelled("env", "prod")), res("none")}, ""},
		{"selector match", claim(selector("env", "dev")),
			[]v1alpha1.InfraResource{res("prod", labelled("env", "prod")), res("dev", labelled("env", "dev"))}, "dev"},
		{"class mismatch", claim(wantClass("fast")),
			[]v1alpha1.InfraResource{res("slow", class("slow")), res("none")}, ""},
		{"class match", claim(wantClass("fast")),
			[]v1alpha1.InfraResource{res("slow", class("slow")), res("fast", class("fast"))}, "fast"},
		{"a claim without class takes a resource of any class", claim(),
			[]v1alpha1.InfraResource{res("fast", class("fast"))}, "fast"},
		{"equality requirement", claim(require("engine", "postgres")),
			[]v1alpha1.InfraResource{res("my"), res("pg", capability("engine", "postgres"))}, "pg"},
		{"semver constraint requirement is matched as one", claim(require("version", ">= 5.6")),
			[]v1alpha1.InfraResource{res("old", capability("version", "5.5.1")), res("new", capability("version", "5.7.0"))}, "new"},
		{"a partial version constraint matches its range", claim(require("version", "8")),
			[]v1alpha1.InfraResource{res("v5", capability("version", "5.7")), res("v8")}, "v8"},
		{"a missing capability fails a requirement", claim(require("region", "eu")), []v1alpha1.InfraResource{res("a")}, ""},
		{"a non-version capability fails a semver constraint", claim(require("version", ">= 1.0")),
			[]v1alpha1.InfraResource{res("a", capability("version", "latest"))}, ""},
		{"no resources, no match", claim(), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got, err := FindMatchingResource(tc.claim, tc.resources)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("bound to %q, want %q", name, tc.want)
			}
		})
	}
}

func TestInvalidRequirement(t *testing.T) {
	for _, v := range []string{">= banana", "~> 1.x.y.z", "!!1"} {
		_, err := FindMatchingResource(claim(require("version", v)), []v1alpha1.InfraResource{res("a")})
		var se *Error
		if !errors.As(err, &se) || se.Reason != v1alpha1.ReasonInvalidRequirement {
			t.Errorf("requirement %q: err = %v, want reason %s", v, err, v1alpha1.ReasonInvalidRequirement)
		}
	}
}

func TestCheckStaticBinding(t *testing.T) {
	cases := []struct {
		reason string
		res    v1alpha1.InfraResource
		want   string // expected reason, "" for allowed
	}{
		{"a free resource that fits", res("a"), ""},
		{"a resource pre-bound to this claim", res("a", claimRef("app", "db", "")), ""},
		{"a resource bound to another claim", res("a", claimRef("app", "other", "x")), v1alpha1.ReasonResourceBoundToOtherClaim},
		{"a resource of another kind", res("a", kind("Bucket")), v1alpha1.ReasonResourceMismatch},
		{"a resource too small", res("a", capacity("1Gi")), v1alpha1.ReasonResourceMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			err := CheckStaticBinding(claim(), &tc.res)
			got := ""
			var se *Error
			if errors.As(err, &se) {
				got = se.Reason
			} else if err != nil {
				t.Fatalf("untyped error %v", err)
			}
			if got != tc.want {
				t.Errorf("reason %q, want %q (%v)", got, tc.want, err)
			}
		})
	}
}

func TestSelectClass(t *testing.T) {
	cls := func(name, kind string, def bool) v1alpha1.InfraClass {
		return v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: def}}
	}
	cases := []struct {
		reason     string
		claim      *v1alpha1.InfraClaim
		classes    []v1alpha1.InfraClass
		want       string
		wantReason string
	}{
		{"the named class", claim(wantClass("fast")), []v1alpha1.InfraClass{cls("slow", "Database", true), cls("fast", "Database", false)}, "fast", ""},
		{"the named class is missing", claim(wantClass("fast")), []v1alpha1.InfraClass{cls("slow", "Database", true)}, "", v1alpha1.ReasonClassNotFound},
		{"the named class serves another kind", claim(wantClass("b")), []v1alpha1.InfraClass{cls("b", "Bucket", false)}, "", v1alpha1.ReasonClassKindMismatch},
		{"the default class of the kind", claim(), []v1alpha1.InfraClass{cls("b", "Bucket", true), cls("d", "Database", true), cls("e", "Database", false)}, "d", ""},
		{"no default class: no class, no error", claim(), []v1alpha1.InfraClass{cls("e", "Database", false)}, "", ""},
		{"two default classes of the kind", claim(), []v1alpha1.InfraClass{cls("d1", "Database", true), cls("d2", "Database", true)}, "", v1alpha1.ReasonMultipleDefaultClasses},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got, err := SelectClass(tc.claim, tc.classes)
			gotReason := ""
			var se *Error
			if errors.As(err, &se) {
				gotReason = se.Reason
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want || gotReason != tc.wantReason {
				t.Errorf("got class %q reason %q (%v), want %q reason %q", name, gotReason, err, tc.want, tc.wantReason)
			}
		})
	}
}

// BenchmarkFindMatchingResource matches one claim (a selector, two requirements, one of them a
// semver constraint, a storage request) among 10,000 Available resources.
func BenchmarkFindMatchingResource(b *testing.B) {
	resources := make([]v1alpha1.InfraResource, 10000)
	for i := range resources {
		resources[i] = res(fmt.Sprintf("r-%05d", i),
			capacity(fmt.Sprintf("%dGi", 1+i%200)), labelled("env", []string{"dev", "prod"}[i%2]),
			capability("version", fmt.Sprintf("%d.%d.0", 5+i%4, i%10)))
	}
	c := claim(request("150Gi"), selector("env", "dev"), require("engine", "mysql"), require("version", ">= 7.0"))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if got, err := FindMatchingResource(c, resources); err != nil || got == nil {
			b.Fatalf("no match: %v", err)
		}
	}
}
