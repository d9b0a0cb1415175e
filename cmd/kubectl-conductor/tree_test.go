package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func graphClaim(name string, phase v1alpha1.ClaimPhase, inputs string, reads ...v1alpha1.ParameterFrom) v1alpha1.InfraClaim {
	c := v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
	c.Spec.ParametersFrom = reads
	c.Status.Phase = phase
	if phase == v1alpha1.ClaimBound {
		c.Status.ResourceName = name + "-1a2b3"
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "True", Reason: "Applied"}}
	}
	if inputs != "" {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionInputsReady, Status: "False", Reason: inputs})
	}
	return c
}

// The tree of a chain of three (the third reads both others), one claim read from another
// namespace, and a cycle: each claim once in full, the second path to it marked, the cycle marked.
func TestTreeShowsWhatReadsWhat(t *testing.T) {
	claims := []v1alpha1.InfraClaim{
		graphClaim("network", v1alpha1.ClaimBound, ""),
		graphClaim("db", v1alpha1.ClaimBound, "", v1alpha1.ParameterFrom{Parameter: "vpc_id", Claim: "network", Output: "vpc_id"}),
		graphClaim("app", v1alpha1.ClaimPending, v1alpha1.ReasonWaitingForUpstream,
			v1alpha1.ParameterFrom{Parameter: "endpoint", Claim: "db", Output: "endpoint"},
			v1alpha1.ParameterFrom{Parameter: "vpc_id", Claim: "network", Output: "vpc_id"},
			v1alpha1.ParameterFrom{Parameter: "secret_word", Claim: "network", Output: "password"}),
		graphClaim("cache", v1alpha1.ClaimPending, "", v1alpha1.ParameterFrom{Parameter: "dns", Claim: "zone", Namespace: "platform", Output: "zone_id"}),
		graphClaim("x", v1alpha1.ClaimPending, v1alpha1.ReasonDependencyCycle, v1alpha1.ParameterFrom{Parameter: "a", Claim: "y", Output: "a"}),
		graphClaim("y", v1alpha1.ClaimPending, v1alpha1.ReasonDependencyCycle, v1alpha1.ParameterFrom{Parameter: "a", Claim: "x", Output: "a"}),
	}
	var out bytes.Buffer
	graphOf(claims).writeTree(&out, "team")
	got := out.String()
	t.Log("\n" + got)
	want := []string{
		"network  [Bound, Ready=True(Applied), resource network-1a2b3]",
		"├── app  [Pending, Inputs=WaitingForUpstream]  (reads password as secret_word, vpc_id as vpc_id)",
		"└── db  [Bound, Ready=True(Applied), resource db-1a2b3]  (reads vpc_id as vpc_id)",
		"    └── app  [Pending, Inputs=WaitingForUpstream]  (reads endpoint as endpoint)  (see above)",
		"platform/zone (another namespace)",
		"└── cache  [Pending]  (reads zone_id as dns)",
		"x  [Pending, Inputs=DependencyCycle]  (cycle)",
		"y  [Pending, Inputs=DependencyCycle]  (cycle)",
	}
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Errorf("tree lacks line %q", w)
		}
	}

	out.Reset()
	graphOf(claims).writeMermaid(&out, "team")
	for _, w := range []string{"flowchart LR", `n_team_network -->|"vpc_id → vpc_id"| n_team_db`, `n_team_network -->|"password → secret_word, vpc_id → vpc_id"| n_team_app`, `n_platform_zone -->|"zone_id → dns"| n_team_cache`} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("mermaid lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	graphOf(claims).writeDOT(&out, "team")
	if !strings.Contains(out.String(), `n_team_db -> n_team_app [label="endpoint → endpoint"];`) {
		t.Errorf("dot lacks the db → app edge:\n%s", out.String())
	}
}
