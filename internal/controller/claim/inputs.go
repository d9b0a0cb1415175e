package claim

// Claims that read other claims' outputs (spec.parametersFrom). Each reconcile resolves what the
// claim reads, from the cache, into status.inputs and the InputsReady condition:
//
//   - every upstream claim must exist, not be deleting, be Ready and name a resource with the
//     output; another namespace's must be granted by an InfraOutputGrant there;
//   - a non-sensitive output is read from the upstream resource's status.outputs; a sensitive one
//     (in no status) from the upstream's connection Secret, which is named, never copied;
//   - status.inputs.digest hashes every value read (sensitive ones too, by value), so that the
//     resource is rendered again (rerender.go) only when a value read changed;
//   - when anything is missing the claim keeps its last reads and digest: an unbound claim is not
//     provisioned, a bound one keeps its infrastructure and is not rendered with empty values.
//
// Claims read each other in a graph: a cycle is refused here, by name, for every claim on it (the
// API refuses a claim that reads itself). Which claims read this one (status.inputs.readBy) comes
// from the IndexClaimUpstreams index; deleting a claim waits for them (release.go).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// maxGraphWalk bounds the claims a cycle search visits from one claim.
const maxGraphWalk = 1024

// inputProblem is why a claim's inputs are not all there: a reason of InputsReady and a message.
type inputProblem struct{ reason, message string }

// observeInputs resolves the claim's spec.parametersFrom into status.inputs (reads and digest,
// when every value is there) and the InputsReady condition, and lists the claims that read it into
// status.inputs.readBy. It returns the problem that holds the claim back (nil when none), and an
// error of the API server as it is.
func (r *Reconciler) observeInputs(ctx context.Context, claim *v1alpha1.InfraClaim) (*inputProblem, error) {
	readBy, err := r.dependents(ctx, claim)
	if err != nil {
		return nil, err
	}
	if len(claim.Spec.ParametersFrom) == 0 {
		meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionInputsReady)
		if len(readBy) == 0 {
			claim.Status.Inputs = nil
		} else {
			claim.Status.Inputs = &v1alpha1.ClaimInputs{ReadBy: readBy}
		}
		return nil, nil
	}
	if claim.Status.Inputs == nil {
		claim.Status.Inputs = &v1alpha1.ClaimInputs{}
	}
	claim.Status.Inputs.ReadBy = readBy
	problem, reads, digest, err := r.resolve(ctx, claim)
	if err != nil {
		return nil, err
	}
	if problem != nil {
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionInputsReady, metav1.ConditionFalse, problem.reason, problem.message)
		return problem, nil
	}
	claim.Status.Inputs.Reads = reads
	claim.Status.Inputs.Digest = digest
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionInputsReady, metav1.ConditionTrue, v1alpha1.ReasonInputsResolved,
		fmt.Sprintf("reads %d value(s) from %s", len(reads), strings.ReplaceAll(provision.ReadsFrom(claim), ",", ", ")))
	return nil, nil
}

// resolve reads every value of spec.parametersFrom and returns them sorted by parameter with
// their digest (inputsDigest). The first problem found (in the order of the list; a cycle first)
// is returned instead, with the others' parameters in its message.
func (r *Reconciler) resolve(ctx context.Context, claim *v1alpha1.InfraClaim) (*inputProblem, []v1alpha1.InputRead, string, error) {
	cycle, err := r.findCycle(ctx, claim)
	if err != nil {
		return nil, nil, "", err
	}
	if cycle != nil {
		shown := cycle
		if len(shown) > 2*maxListed {
			shown = append(append(slices.Clone(cycle[:maxListed]), fmt.Sprintf("(%d more)", len(cycle)-2*maxListed)), cycle[len(cycle)-maxListed:]...)
		}
		return &inputProblem{v1alpha1.ReasonDependencyCycle, "claims read each other in a cycle: " + strings.Join(shown, " → ") +
			"; nothing on it is provisioned or rendered again until one of them stops reading (spec.parametersFrom)"}, nil, "", nil
	}
	var first *inputProblem
	var others []string
	reads := make([]v1alpha1.InputRead, 0, len(claim.Spec.ParametersFrom))
	sums := map[string][]byte{}
	for _, p := range claim.Spec.ParametersFrom {
		read, sum, problem, err := r.read(ctx, claim, p)
		if err != nil {
			return nil, nil, "", err
		}
		switch {
		case problem == nil:
			reads = append(reads, read)
			sums[read.Parameter] = sum
		case first == nil:
			first = problem
		default:
			others = append(others, p.Parameter)
		}
	}
	if first != nil {
		if len(others) > 0 {
			first.message += fmt.Sprintf(" (and parameters %s)", strings.Join(others, ", "))
		}
		return first, nil, "", nil
	}
	sort.Slice(reads, func(i, j int) bool { return reads[i].Parameter < reads[j].Parameter })
	return nil, reads, inputsDigest(reads, sums), nil
}

// inputsDigest is "sha256:" and the hex SHA-256 of the reads (sorted by parameter): each one's
// parameter, upstream, output and value, the value of a sensitive one being sums[parameter], the
// version of the Secret that holds it (so the digest changes with it and shows nothing of it). Lengths precede
// every field: no two different sets of reads hash the same bytes.
func inputsDigest(reads []v1alpha1.InputRead, sums map[string][]byte) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		for i, l := 0, uint64(len(b)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(b)
	}
	for _, rd := range reads {
		field([]byte(rd.Parameter))
		field([]byte(rd.Namespace + "/" + rd.Claim + "#" + rd.Output))
		if rd.Sensitive {
			field(append([]byte("sensitive:"), sums[rd.Parameter]...))
		} else if rd.Value != nil {
			field(rd.Value.Raw)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// upstreamKey is "namespace/name" of the claim p names, read from a claim of namespace ns.
func upstreamKey(ns string, p v1alpha1.ParameterFrom) types.NamespacedName {
	return types.NamespacedName{Namespace: p.UpstreamNamespace(ns), Name: p.Claim}
}

// read resolves one parameter: the upstream claim, its resource and the output; for a sensitive
// output, sum names the Secret's version (its name, UID and resourceVersion: for the digest only,
// so that a value or a Secret that changes renders the reader again), never its value.
func (r *Reconciler) read(ctx context.Context, claim *v1alpha1.InfraClaim, p v1alpha1.ParameterFrom) (read v1alpha1.InputRead, sum []byte, problem *inputProblem, err error) {
	key := upstreamKey(claim.Namespace, p)
	read = v1alpha1.InputRead{Parameter: p.Parameter, Namespace: key.Namespace, Claim: key.Name, Output: p.Output}
	if key.Namespace != claim.Namespace {
		ok, err := r.granted(ctx, key, claim.Namespace)
		if err != nil || !ok {
			return read, nil, &inputProblem{v1alpha1.ReasonReferenceNotGranted, fmt.Sprintf(
				"%s: namespace %s grants no read of claim %s to namespace %s (an InfraOutputGrant there)", p.Parameter, key.Namespace, key.Name, claim.Namespace)}, err
		}
	}
	up := &v1alpha1.InfraClaim{}
	err = r.Get(ctx, key, up)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !up.DeletionTimestamp.IsZero()):
		return read, nil, &inputProblem{v1alpha1.ReasonUpstreamNotFound, fmt.Sprintf("%s: claim %s does not exist or is being deleted%s", p.Parameter, key, keepsNote(claim))}, nil
	case err != nil:
		return read, nil, nil, err
	case !meta.IsStatusConditionTrue(up.Status.Conditions, v1alpha1.ConditionReady) || up.Status.ResourceName == "":
		why := "not bound yet"
		if c := meta.FindStatusCondition(up.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			why = c.Reason
		}
		return read, nil, &inputProblem{v1alpha1.ReasonWaitingForUpstream, fmt.Sprintf("%s: claim %s is not Ready (%s)", p.Parameter, key, why)}, nil
	}
	res := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, types.NamespacedName{Name: up.Status.ResourceName}, res); err != nil {
		if apierrors.IsNotFound(err) {
			return read, nil, &inputProblem{v1alpha1.ReasonWaitingForUpstream, fmt.Sprintf("%s: claim %s's resource %s is gone", p.Parameter, key, up.Status.ResourceName)}, nil
		}
		return read, nil, nil, err
	}
	if v, ok := res.Status.Outputs[p.Output]; ok {
		read.Value = v.DeepCopy()
		return read, nil, nil, nil
	}
	if ref := res.Status.ConnectionSecret; ref != nil {
		secret := &corev1.Secret{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret)
		if err != nil && !apierrors.IsNotFound(err) {
			return read, nil, nil, err
		}
		if _, ok := secret.Data[p.Output]; ok && err == nil && provision.IsConnectionSecretOf(secret, res) {
			// The value itself goes nowhere: the resource names the Secret and key.
			if err := r.keepForReaders(ctx, secret); err != nil {
				return read, nil, nil, err
			}
			read.Sensitive = true
			read.Secret = &v1alpha1.SecretKeySelector{Namespace: ref.Namespace, Name: ref.Name, Key: p.Output}
			// No hash of the value is published: the digest takes the Secret's name, UID and
			// resourceVersion, which change whenever its value can have (a write that changes
			// nothing else wakes the resource once, whose Secret inputs' hash then starts no run).
			return read, []byte(ref.Namespace + "/" + ref.Name + "\x00" + string(secret.UID) + "\x00" + secret.ResourceVersion), nil, nil
		}
	}
	names := slices.Sorted(maps.Keys(res.Status.Outputs))
	return read, nil, &inputProblem{v1alpha1.ReasonOutputNotFound, fmt.Sprintf(
		"%s: claim %s's module has no output %q among its non-sensitive outputs (%s), and its connection Secret has no such key "+
			"(a sensitive output is read from the upstream's connection Secret: set its spec.writeConnectionSecretToRef)",
		p.Parameter, key, p.Output, strings.Join(names, ", "))}, nil
}

// keepForReaders adds FinalizerReadByClaims to an upstream's connection Secret that a claim reads
// a sensitive output from (one patch, the first time): the reader's runs read it there until the
// reader is reclaimed, even while its namespace is being deleted.
func (r *Reconciler) keepForReaders(ctx context.Context, secret *corev1.Secret) error {
	if controllerutil.ContainsFinalizer(secret, v1alpha1.FinalizerReadByClaims) || !secret.DeletionTimestamp.IsZero() {
		return nil
	}
	before := secret.DeepCopy()
	controllerutil.AddFinalizer(secret, v1alpha1.FinalizerReadByClaims)
	return client.IgnoreNotFound(r.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// keepsNote is what a bound claim does when an upstream is gone.
func keepsNote(claim *v1alpha1.InfraClaim) string {
	if claim.Spec.ResourceName == "" {
		return ""
	}
	return "; resource " + claim.Spec.ResourceName + " keeps its infrastructure and the values last read"
}

// granted reports whether an InfraOutputGrant in up's namespace lets namespace from read claim up.
func (r *Reconciler) granted(ctx context.Context, up types.NamespacedName, from string) (bool, error) {
	grants := &v1alpha1.InfraOutputGrantList{}
	if err := r.List(ctx, grants, client.InNamespace(up.Namespace)); err != nil {
		return false, err
	}
	for i := range grants.Items {
		if grants.Items[i].Grants(from, up.Name) {
			return true, nil
		}
	}
	return false, nil
}

// findCycle walks the claims the claim reads, transitively, from the cache, and returns the cycle
// through the claim ("ns/a", "ns/b", "ns/a") when one comes back to it; nil when none does (a
// cycle elsewhere in the graph is its own claims' to report). At most maxGraphWalk claims are
// visited.
func (r *Reconciler) findCycle(ctx context.Context, claim *v1alpha1.InfraClaim) ([]string, error) {
	start := client.ObjectKeyFromObject(claim)
	visited := map[types.NamespacedName]bool{}
	var path []string
	var walk func(c *v1alpha1.InfraClaim) ([]string, error)
	walk = func(c *v1alpha1.InfraClaim) ([]string, error) {
		path = append(path, client.ObjectKeyFromObject(c).String())
		defer func() { path = path[:len(path)-1] }()
		for _, p := range c.Spec.ParametersFrom {
			key := upstreamKey(c.Namespace, p)
			if key == start {
				return append(slices.Clone(path), key.String()), nil
			}
			if visited[key] || len(visited) >= maxGraphWalk {
				continue
			}
			visited[key] = true
			up := &v1alpha1.InfraClaim{}
			if err := r.Get(ctx, key, up); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			if cycle, err := walk(up); cycle != nil || err != nil {
				return cycle, err
			}
		}
		return nil, nil
	}
	return walk(claim)
}

// dependents lists the claims that read claim (IndexClaimUpstreams; another namespace's only when
// a grant lets it), sorted, with their resources.
func (r *Reconciler) dependents(ctx context.Context, claim *v1alpha1.InfraClaim) ([]v1alpha1.ClaimDependent, error) {
	list := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, list, client.MatchingFields{shared.IndexClaimUpstreams: shared.UpstreamKey(claim.Namespace, claim.Name)}); err != nil {
		return nil, err
	}
	out := make([]v1alpha1.ClaimDependent, 0, len(list.Items))
	for i := range list.Items {
		d := &list.Items[i]
		if d.UID == claim.UID {
			continue
		}
		if d.Namespace != claim.Namespace {
			// Another namespace's claim reads this one only while a grant here lets it: one
			// without cannot hold this claim back, nor show in its status.
			ok, err := r.granted(ctx, client.ObjectKeyFromObject(claim), d.Namespace)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, v1alpha1.ClaimDependent{Namespace: d.Namespace, Name: d.Name, ResourceName: provision.BoundName(d)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
