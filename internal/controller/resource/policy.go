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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// WaitPolicyApproval and WaitPolicyDenied are the pending plan reasons of a rule
// (tfrunner.HoldPolicyApproval, tfrunner.HoldPolicyDenied).
const (
	WaitPolicyApproval = tfrunner.HoldPolicyApproval
	WaitPolicyDenied   = tfrunner.HoldPolicyDenied
)

// policyDigest identifies rules (12 hex characters of a hash of them; "" for none), kept with a
// pending plan so that a changed policy plans again.
func policyDigest(rules []policy.Rule) string {
	if len(rules) == 0 {
		return ""
	}
	b, _ := json.Marshal(rules)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// policyMoved reports whether the plan that waits was decided under other rules than the class
// has now: it is planned again (a new rule may refuse it, a removed one let it through).
func policyMoved(s *resourceScope) bool {
	pp := s.res.Status.PendingPlan
	return pp != nil && s.res.Status.LastRun != nil && s.res.Status.LastRun.Result == RunWaitingForApproval &&
		pp.PolicyDigest != policyDigest(provision.PolicyRules(s.class))
}

// preparePolicy sets the run's rules and facts on s (the class's rules; the claim, class and
// resource as rules see them), once the class is known. The error is an *invalidPolicy when a rule
// does not compile, or the claim's read.
func (r *syncer) preparePolicy(ctx context.Context, s *resourceScope) error {
	s.policy = provision.PolicyRules(s.class)
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
	if ref := res.Spec.ClaimRef; ref != nil {
		claim := &v1alpha1.InfraClaim{}
		err := r.api.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, claim)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		s.facts.Claim = policy.Object{Namespace: ref.Namespace, Name: ref.Name, Labels: claim.Labels}
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
