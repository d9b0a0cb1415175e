package resource

// Plan policy: the class's rules (spec.policy) go with every apply run in its gate
// (tfrunner.Gate.Policy), with what they see of the claim, the class and the resource; the run
// evaluates them between plan and apply (internal/policy). The rules are compiled here first, so
// that a rule that does not compile fails the run before it starts (PolicyInvalid), and a held or
// refused plan records the policy it was decided under (pendingPlan.policyDigest): a new policy
// plans again.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// policyDigest identifies rules and what they saw (12 hex characters of a hash of both; "" for
// no rules), kept with a pending plan so that a changed policy, or a changed label a rule reads,
// plans again.
func policyDigest(rules []policy.Rule, facts policy.Facts) string {
	if len(rules) == 0 {
		return ""
	}
	b, _ := json.Marshal([]any{rules, facts})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// policyMoved reports whether the plan that waits was decided under other rules (or facts) than
// the class gives now: it is planned again (a new rule may refuse it, a removed one, or a label
// the claim now has, let it through). A class that is gone moves nothing (preparePolicy refuses
// to run such a plan without its rules). Call it once preparePolicy has set s.policy and s.facts.
func policyMoved(s *resourceScope) bool {
	pp := s.res.Status.PendingPlan
	if pp == nil || s.res.Status.LastRun == nil || s.res.Status.LastRun.Result != v1alpha1.RunWaitingForApproval {
		return false
	}
	if s.class == nil && s.res.Spec.ClassRef != nil {
		return false
	}
	return pp.PolicyDigest != policyDigest(s.policy, s.facts)
}

// preparePolicy sets the run's rules and facts on s (the class's rules, then discovery's
// (discoveryRules); the claim, class and resource as rules see them, and the claim's namespace
// when a rule reads it), once the class is known. The error is an *invalidPolicy when a rule does
// not compile, or the claim's read.
func (r *syncer) preparePolicy(ctx context.Context, s *resourceScope) error {
	if err := r.prepareClassPolicy(ctx, s); err != nil {
		return err
	}
	s.policy = append(s.policy, discoveryRules(s.res)...)
	return nil
}

// Discovery's rules (issue 68): what a class's discovery brings in is only read, never changed by
// surprise.
var (
	// DiscoveryReadOnly refuses any plan of a class's listing resource that would change a managed
	// object: a discovery module only reads (data sources).
	DiscoveryReadOnly = policy.Rule{Name: "discovery-read-only", Expression: "false", Action: policy.ActionDeny,
		Message: "a discovery module only reads (data sources): this plan would change managed objects"}
	// DiscoveredNoDestroy refuses a discovered resource's first plan that would delete or replace
	// what it found: nobody created it here.
	DiscoveredNoDestroy = policy.Rule{Name: "discovered-no-destroy", Expression: "!('delete' in change.actions)", Action: policy.ActionDeny,
		Message: "a discovered object is never deleted or replaced by its first plan: fix the variables its discovery gave, or the module"}
	// DiscoveredImportOnly holds a discovered resource's first plan unless it only imports (0 to
	// add, 0 to change, 0 to destroy): the plan is shown and waits for a person.
	DiscoveredImportOnly = policy.Rule{Name: "discovered-import-only", Expression: "change.actions == ['no-op']", Action: policy.ActionRequireApproval,
		Message: "a discovered object's first plan must only import it (0 to add, 0 to change, 0 to destroy)"}
)

// discoveryRules are the rules discovery adds to a resource's runs: DiscoveryReadOnly on a class's
// listing resource (conductor.io/discovery-of), and DiscoveredNoDestroy and DiscoveredImportOnly
// on a discovered resource (conductor.io/discovered-by) until its first apply succeeded.
func discoveryRules(res *v1alpha1.InfraResource) []policy.Rule {
	switch {
	case res.Labels[v1alpha1.LabelDiscoveryOf] != "":
		return []policy.Rule{DiscoveryReadOnly}
	case res.Labels[v1alpha1.LabelDiscoveredBy] != "" && !state.EverApplied(res):
		return []policy.Rule{DiscoveredNoDestroy, DiscoveredImportOnly}
	}
	return nil
}

// prepareClassPolicy sets the class's rules and the facts they see on s.
func (r *syncer) prepareClassPolicy(ctx context.Context, s *resourceScope) error {
	s.policy, s.facts = provision.PolicyRules(s.class), policy.Facts{}
	if pp := s.res.Status.PendingPlan; s.class == nil && s.res.Spec.ClassRef != nil && pp != nil && pp.PolicyDigest != "" {
		// The plan that waits was decided under the class's rules, which cannot be read now.
		return &invalidPolicy{class: s.res.Spec.ClassRef.Name, err: errors.New("the class is gone, and the plan that waits was decided under its rules")}
	}
	if len(s.policy) == 0 {
		return nil
	}
	if err := provision.CheckClassPolicy(s.class); err != nil {
		return &invalidPolicy{class: s.class.Name, err: err}
	}
	res := s.res
	s.facts = policy.Facts{
		Class:    policy.Object{Name: s.class.Name, Labels: s.class.Labels},
		Resource: policy.Object{Name: res.Name, Labels: res.Labels},
	}
	if policy.ReadsCost(s.policy) {
		// The estimate the claim's status shows (an unpriced class, or one whose price does not
		// compute, costs 0.0 to rules, as to budgets).
		if cost, err := scheduler.MonthlyCost(s.class.Spec.Price, res.Spec.Capacity); err == nil && cost != nil {
			s.facts.Cost, _ = strconv.ParseFloat(cost.String(), 64)
		}
	}
	if ref := res.Spec.ClaimRef; ref != nil {
		claim := &v1alpha1.InfraClaim{}
		err := r.api.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, claim)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		s.facts.Claim = policy.Object{Namespace: ref.Namespace, Name: ref.Name, Labels: claim.Labels}
		if policy.ReadsNamespace(s.policy) {
			ns := &corev1.Namespace{}
			if err := r.api.Get(ctx, types.NamespacedName{Name: ref.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			s.facts.Namespace = policy.Object{Name: ref.Namespace}
			if len(ns.Labels) > 0 {
				s.facts.Namespace.Labels = ns.Labels
			}
		}
	}
	return nil
}

// invalidPolicy is a class whose plan rules do not compile: no run starts.
type invalidPolicy struct {
	class string
	err   error
}

func (e *invalidPolicy) Error() string {
	return "class " + e.class + "'s plan policy does not compile, so no plan is applied: " + e.err.Error()
}
