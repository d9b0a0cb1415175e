package provision

import (
	"fmt"
	"slices"
	"time"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// SharedGrace is how long a shared resource with no share is kept after its creation and after
// the last join a claim marked on it (conductor.io/shared-joined): the sharing reconciler deletes
// it only past that, and a deletion by hand waits for it too. SharedJoinRefresh is how often a
// claim that waits for a shared resource marks its join again: well within the grace, so a shared
// resource that claims wait for is never deleted under them.
const (
	SharedGrace       = time.Minute
	SharedJoinRefresh = 20 * time.Second
)

// SharedIdleFor is how long res (a shared resource) has been without a join at now: since its
// creation or its last join (conductor.io/shared-joined), whichever is later.
func SharedIdleFor(res *v1alpha1.InfraResource, now time.Time) time.Duration {
	since := res.CreationTimestamp.Time
	if t, err := time.Parse(time.RFC3339, res.Annotations[v1alpha1.AnnotationSharedJoined]); err == nil && t.After(since) {
		since = t
	}
	return now.Sub(since)
}

// RenderedForShared is the value of conductor.io/rendered-generation on a shared resource: its
// variables were rendered for the class's stand-in claim (SharedClaim), never for a claim.
const RenderedForShared = "shared"

// ShareClass is the view of a sharing class that its shares are rendered (and rendered again)
// from: the class with the per-claim module and variables (spec.sharing.perClaim) in place of its
// own, no import identities, none of the class's variablesFrom and generatedPasswords (inputs of
// the class's module's variables), and no module inputs known (the class check reads the class's
// own module). It returns class itself when the class does not share.
func ShareClass(class *v1alpha1.InfraClass) *v1alpha1.InfraClass {
	if class.Spec.Sharing == nil {
		return class
	}
	view := class.DeepCopy()
	view.Spec.Module = class.Spec.Sharing.PerClaim.Module
	view.Spec.Variables = class.Spec.Sharing.PerClaim.Variables
	view.Spec.ImportIdentities = nil
	// Inputs of the class's own module's variables; the per-claim module's come from its
	// variables and sharedOutputs. What the runs are given (env, Kubernetes access, workload
	// identity, module credentials, runner pool) is the class's for both.
	view.Spec.VariablesFrom = nil
	view.Spec.GeneratedPasswords = nil
	view.Status.Inputs = nil
	view.Status.Outputs = nil
	return view
}

// ClassFor is the class view res is rendered from: ShareClass for a share (labelled
// conductor.io/share-of), else class.
func ClassFor(res *v1alpha1.InfraResource, class *v1alpha1.InfraClass) *v1alpha1.InfraClass {
	if res.Labels[v1alpha1.LabelShareOf] != "" {
		return ShareClass(class)
	}
	return class
}

// SharedClaim is the stand-in claim a class's shared resources are rendered for: no name, no
// namespace, no parameters and no requests (a shared resource is no claim's; what each claim
// asks goes to its share).
func SharedClaim(class *v1alpha1.InfraClass) *v1alpha1.InfraClaim {
	claim := &v1alpha1.InfraClaim{}
	claim.Spec.ResourceKind = class.Spec.ResourceKind
	claim.Spec.ClassName = class.Name
	return claim
}

// SharedResourceFromClass builds a new shared resource of a sharing class: ResourceFromClass for
// the stand-in claim (SharedClaim) under a new name (SharedName), with no claimRef and no
// capacity, labelled conductor.io/shared-of with the class, writing its outputs (every one,
// sensitive ones included) to the Secret of its own name in namespace, the controller's: what its
// shares read (spec.sharing.perClaim.sharedOutputs). The class's reclaim policy applies when its
// last share is gone. It returns an error wrapping ResourceFromClass's *render.Error when a template does not render.
func SharedResourceFromClass(class *v1alpha1.InfraClass, namespace string) (*v1alpha1.InfraResource, error) {
	name := SharedName(class)
	res, err := ResourceFromClass(SharedClaim(class), class, name)
	if err != nil {
		return nil, fmt.Errorf("the variables of sharing class %s render its shared resources, for no claim (claim.spec's maps are empty; a claim's own values go to spec.sharing.perClaim.variables): %w", class.Name, err)
	}
	res.Spec.ClaimRef = nil
	res.Spec.Capacity = nil
	delete(res.Labels, v1alpha1.LabelClaimNamespace)
	delete(res.Labels, v1alpha1.LabelClaimName)
	res.Labels[v1alpha1.LabelSharedOf] = v1alpha1.LabelValue(class.Name)
	res.Annotations[v1alpha1.AnnotationRenderedGeneration] = RenderedForShared
	res.Spec.WriteConnectionSecretToRef = &v1alpha1.SecretReference{Namespace: namespace, Name: name}
	return res, nil
}

// SharedName is a new name for a shared resource of the class: the class's name (at most 40
// characters), "-shared-" and 6 random hex characters (a name taken already makes the Create fail
// with AlreadyExists, and the claim reconciler tries again). At most 54 characters: its shares'
// names (SharedPlace) stay valid label values.
func SharedName(class *v1alpha1.InfraClass) string { return randomName(class, "-shared-") }

// ShareFromClass builds claim's share of shared, the resource taking place n of it
// (v1alpha1.SharedPlace): ResourceFromClass of the per-claim view of the class (ShareClass),
// pre-bound to the claim, labelled conductor.io/share-of with the shared resource, and given each
// of the class's sharedOutputs as the input variable it names: a non-sensitive output (in the
// shared resource's status) as its value, typed as the output is; a sensitive one read at run
// time from the shared resource's connection Secret (a variable passed that way is sensitive, and
// so is every output of the per-claim module that reads it). It returns ResourceFromClass's errors, and an error when the shared
// resource writes no connection Secret or a shared output's variable is set by the class's
// variablesFrom or the per-claim variables already.
func ShareFromClass(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, shared *v1alpha1.InfraResource, n int) (*v1alpha1.InfraResource, error) {
	conn := shared.Spec.WriteConnectionSecretToRef
	if conn == nil {
		return nil, fmt.Errorf("shared resource %s writes no connection Secret: its shares cannot read its outputs", shared.Name)
	}
	res, err := ResourceFromClass(claim, ShareClass(class), v1alpha1.SharedPlace(shared.Name, n))
	if err != nil {
		return nil, err
	}
	res.Labels[v1alpha1.LabelShareOf] = v1alpha1.LabelValue(shared.Name)
	for _, out := range class.Spec.Sharing.PerClaim.SharedOutputs {
		if slices.ContainsFunc(res.Spec.VariablesFrom, func(in v1alpha1.SecretInput) bool { return in.Name == out.Variable }) {
			return nil, fmt.Errorf("sharing.perClaim.sharedOutputs passes %s as variable %s, which the claim's inputs set too", out.Output, out.Variable)
		}
		if _, ok := res.Spec.Variables[out.Variable]; ok {
			return nil, fmt.Errorf("sharing.perClaim.sharedOutputs passes %s as variable %s, which sharing.perClaim.variables sets too", out.Output, out.Variable)
		}
		if v, ok := shared.Status.Outputs[out.Output]; ok {
			// Non-sensitive (status holds no other): its value, typed as the output is.
			res.Spec.Variables[out.Variable] = *v.DeepCopy()
			continue
		}
		res.Spec.VariablesFrom = append(res.Spec.VariablesFrom, v1alpha1.SecretInput{Name: out.Variable,
			SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: conn.Namespace, Name: conn.Name, Key: out.Output}})
	}
	return res, nil
}

// SharedInputs are the entries of a share's variablesFrom that read its shared resource's
// sensitive outputs (those spec.sharing.perClaim.sharedOutputs names): what a new render of the
// claim's own sensitive inputs (VariablesFrom) keeps. Nil for a resource that is no share.
func SharedInputs(res *v1alpha1.InfraResource, class *v1alpha1.InfraClass) []v1alpha1.SecretInput {
	if res.Labels[v1alpha1.LabelShareOf] == "" || class.Spec.Sharing == nil {
		return nil
	}
	var out []v1alpha1.SecretInput
	for _, in := range res.Spec.VariablesFrom {
		if slices.ContainsFunc(class.Spec.Sharing.PerClaim.SharedOutputs, func(o v1alpha1.SharedOutput) bool { return o.Variable == in.Name }) {
			out = append(out, in)
		}
	}
	return out
}

// KeepSharedValues adds to vars (a new render of a share's per-claim variables) the values of its
// shared resource's non-sensitive outputs the share was given (the variables sharedOutputs names,
// as res holds them): a render of the claim never drops them. vars itself for a resource that is
// no share.
func KeepSharedValues(vars v1alpha1.Variables, res *v1alpha1.InfraResource, class *v1alpha1.InfraClass) v1alpha1.Variables {
	if res.Labels[v1alpha1.LabelShareOf] == "" || class.Spec.Sharing == nil {
		return vars
	}
	for _, o := range class.Spec.Sharing.PerClaim.SharedOutputs {
		if v, ok := res.Spec.Variables[o.Variable]; ok {
			if _, set := vars[o.Variable]; !set {
				if vars == nil {
					vars = v1alpha1.Variables{}
				}
				vars[o.Variable] = *v.DeepCopy()
			}
		}
	}
	return vars
}
