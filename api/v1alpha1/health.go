package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Health as GitOps tools read it. Flux's health checks use sigs.k8s.io/cli-utils' kstatus, which
// decides from status.observedGeneration and the Reconciling and Stalled conditions before it
// looks at Ready (kstatus' checkGenericProperties): every kind of this API sets them from its Ready
// condition (the controller's setHealthConditions), and the Argo CD health check in
// docs/monitoring.md reads the same conditions.
const (
	// ConditionReconciling is True while the object is on its way to Ready and the controller
	// works on it (provisioning, waiting for a runner, a plan waiting for approval); absent
	// otherwise. kstatus: InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the object cannot become Ready without a person: a spec or
	// input that is wrong, a class that does not apply, a resource lost (TerminalReasons); absent
	// otherwise. kstatus: Failed.
	ConditionStalled = "Stalled"
	// ConditionChangePending is True on a bound claim while its resource holds a change for a
	// person: a plan that waits for approval (Manual, a destructive change, an imported object
	// replaced), creates in doubt, or a newer module version the class offers; absent otherwise.
	// Its message says how to move the change on (kubectl conductor approve …). As a PVC's
	// Resizing conditions, it says nothing about readiness: the claim stays Ready meanwhile.
	ConditionChangePending = "ChangePending"
)

// Reasons of the ChangePending and Ready conditions that are not reasons of the resource.
const (
	// ReasonDestructiveChange: a plan deletes or replaces existing objects and waits for approval
	// (the class's destructive-change guard).
	ReasonDestructiveChange = "DestructiveChange"
	// ReasonConnectionSecretMissing: a bound claim's connection Secret is missing (deleted by
	// hand, or another object of that name); the resource writes it again from its state at its
	// next check (every minute). The claim is not Ready meanwhile.
	ReasonConnectionSecretMissing = "ConnectionSecretMissing"
	// ReasonPolicyDenied: a Deny rule of the class's policy refused the resource's plan (the
	// InfraResource's Synced, the claim's ChangePending); a change of the spec, the claim or the
	// policy makes a new one. ReasonPolicyInvalid: a rule of the class's policy does not compile
	// (the class's Ready).
	ReasonPolicyDenied  = "PolicyDenied"
	ReasonPolicyInvalid = "PolicyInvalid"
	// ReasonParametersChecked: the class keeps a ValidatingAdmissionPolicy that refuses claims
	// whose parameters cannot render (a class's AdmissionChecked=True).
	ReasonParametersChecked = "ParametersChecked"
	// ReasonNoParameters: the class's template reads no claim parameter; nothing is checked at
	// admission (AdmissionChecked=True).
	ReasonNoParameters = "NoParameters"
	// ReasonNotExpressible: the class's template reads claim parameters in a way no admission
	// check describes (or the API server refused the policy); claims are checked when they render
	// (AdmissionChecked=False).
	ReasonNotExpressible = "NotExpressible"
	// ReasonAdmissionPolicyConflict: a ValidatingAdmissionPolicy or binding of the class's name
	// exists and is not the class's (no owner reference to it); it is left as it is and claims
	// are checked when they render (AdmissionChecked=False).
	ReasonAdmissionPolicyConflict = "AdmissionPolicyConflict"
)

// TerminalReasons are the Ready reasons that no retry clears: only a change of the spec, of a
// class, of an input, or a person's decision does. An object Ready=False with one of them is
// Stalled (kstatus Failed, Argo CD Degraded); with any other reason it is Reconciling.
var TerminalReasons = map[string]bool{
	ReasonInvalidRequirement:        true,
	ReasonInvalidRequest:            true,
	ReasonClassKindMismatch:         true,
	ReasonMultipleDefaultClasses:    true,
	ReasonClassNotAllowed:           true,
	ReasonResourceNotAllowed:        true,
	ReasonServiceAccountNotFound:    true,
	ReasonServiceAccountForbidden:   true,
	ReasonResourceBoundToOtherClaim: true,
	ReasonResourceMismatch:          true,
	ReasonResourceLost:              true,
	ReasonRenderFailed:              true,
	ReasonInvalidVariables:          true,
	ReasonModuleInvalid:             true,
	ReasonTemplateInvalid:           true,
	ReasonIdentityNotUnique:         true,
	ReasonAdoptionRefused:           true,
	ReasonStateNotOwned:             true,
	ReasonStateMissing:              true,
	ReasonServiceAccountShared:      true,
	ReasonVolumeRefused:             true,
	ReasonPolicyDenied:              true,
	ReasonPolicyInvalid:             true,
}

// StatusConditions are the claim's status.conditions, for code that handles every kind alike.
func (c *InfraClaim) StatusConditions() *[]metav1.Condition { return &c.Status.Conditions }

// StatusConditions are the class's status.conditions.
func (c *InfraClass) StatusConditions() *[]metav1.Condition { return &c.Status.Conditions }

// StatusConditions are the resource's status.conditions.
func (r *InfraResource) StatusConditions() *[]metav1.Condition { return &r.Status.Conditions }

// StatusConditions are the runner pool's status.conditions.
func (p *InfraRunnerPool) StatusConditions() *[]metav1.Condition { return &p.Status.Conditions }
