// Package discovery turns what a class's discovery module lists into resources (issue 68): the
// design's first way infrastructure enters ("a new infrastructure 'function' is created and a kube
// resource is automatically created"), as static PersistentVolumes wait for claims.
//
// A class with spec.discovery gets a listing resource (discovery-<class>, labelled
// conductor.io/discovery-of): an InfraResource of the discovery module, run by the resource
// controller like any other (runner pools, sandbox, the class's Kubernetes access or cloud
// identity), whose plans may change nothing (the discovery-read-only rule), whose drift check every
// interval applies again when its outputs changed, and whose outputs land in a Secret of the
// controller's namespace. This reconciler reads the `candidates` output there and keeps one
// Available resource per candidate (labelled conductor.io/discovered-by; see desired), marks the
// unbound ones the listing no longer finds Lost, and never deletes one.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// DefaultInterval is a discovery's interval when the class sets none.
const DefaultInterval = 10 * time.Minute

// Reconciler keeps each class's discovered resources (see the package comment).
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Secrets reads the listings' Secrets (uncached: the manager's API reader), in Namespace, the
	// controller's namespace.
	Secrets   client.Reader
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// synced holds, by class name, the listing version (listingVersion) and class generation whose
	// candidates were last synced (syncKey): a reconcile that finds both unchanged reads no Secret.
	// In memory: a new leader syncs each class once.
	synced sync.Map
}

// errUnchanged is a listing whose candidates are synced already.
var errUnchanged = errors.New("the listing is synced")

// syncKey identifies what a class's sync was made from: the listing's Secret version and the
// class's generation (its module, kind and run inputs go into the discovered resources).
func syncKey(class *v1alpha1.InfraClass, version string) string {
	return fmt.Sprintf("%s/%d", version, class.Generation)
}

// syncedVersion is the listing version the class's last sync was made from, under its current
// generation ("" when none was).
func (r *Reconciler) syncedVersion(class *v1alpha1.InfraClass) string {
	key, ok := r.synced.Load(class.Name)
	if !ok {
		return ""
	}
	version, gen, _ := strings.Cut(key.(string), "/")
	if gen != fmt.Sprint(class.Generation) {
		return ""
	}
	return version
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile keeps one class's listing resource as its spec.discovery says (or deletes it), then,
// once the listing has published candidates, their resources, and writes status.discovery and
// the Discovered condition.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, req.NamespacedName, class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // the listing goes with it (owner reference)
	}
	before := class.DeepCopy()
	if class.Spec.Discovery == nil || !class.DeletionTimestamp.IsZero() {
		if err := r.dropListing(ctx, class); err != nil {
			return ctrl.Result{}, err
		}
		class.Status.Discovery = nil
		meta.RemoveStatusCondition(&class.Status.Conditions, v1alpha1.ConditionDiscovered)
		_, err := shared.PatchStatusLocked(ctx, r.Client, class, before)
		return shared.RequeueOnConflict(ctrl.Result{}, err)
	}
	listing, err := r.keepListing(ctx, class)
	var taken *takenError
	if errors.As(err, &taken) {
		// Discovery stops and says why; the resource of that name is not touched.
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionDiscovered, metav1.ConditionFalse,
			v1alpha1.ReasonDiscoveryFailed, taken.Error())
		_, err := shared.PatchStatusLocked(ctx, r.Client, class, before)
		return shared.RequeueOnConflict(ctrl.Result{}, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	status := &v1alpha1.DiscoveryStatus{ListingResource: listing.Name}
	if prev := class.Status.Discovery; prev != nil {
		status.ListedAt, status.Candidates = prev.ListedAt, prev.Candidates
	}
	class.Status.Discovery = status
	version, err := r.listingVersion(ctx, listing)
	if err == nil && r.syncedVersion(class) == version && meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionDiscovered) {
		// The listing published nothing since its candidates were synced, under this generation
		// of the class: its Secret is not read again (a discovered resource's every event
		// reconciles the class; the counts below are all that can have moved).
		err = errUnchanged
	}
	var candidates []Candidate
	if err == nil {
		candidates, version, err = r.candidates(ctx, listing)
	}
	switch {
	case err == errUnchanged:
	case err == errNotListed:
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionDiscovered, metav1.ConditionFalse,
			v1alpha1.ReasonDiscoveryFailed, listingProblem(listing, "the listing resource "+listing.Name+" has not listed yet"))
	case err != nil:
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionDiscovered, metav1.ConditionFalse,
			v1alpha1.ReasonDiscoveryFailed, err.Error())
	default:
		if err := r.syncCandidates(ctx, class, candidates); err != nil {
			return shared.RequeueOnConflict(ctrl.Result{}, err)
		}
		r.synced.Store(class.Name, syncKey(class, version))
		status.Candidates, status.ListedAt = int32(len(candidates)), listedAt(listing)
		msg := fmt.Sprintf("the listing found %d candidates", len(candidates))
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionDiscovered, metav1.ConditionTrue, v1alpha1.ReasonDiscovered, msg)
	}
	if err := r.count(ctx, class.Name, status); err != nil {
		return ctrl.Result{}, err
	}
	_, err = shared.PatchStatusLocked(ctx, r.Client, class, before)
	return shared.RequeueOnConflict(ctrl.Result{}, err)
}

// listingProblem is what the listing resource's Synced condition says when it is False, else
// fallback.
func listingProblem(listing *v1alpha1.InfraResource, fallback string) string {
	if c := meta.FindStatusCondition(listing.Status.Conditions, v1alpha1.ConditionSynced); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("listing resource %s: %s: %s", listing.Name, c.Reason, c.Message)
	}
	return fallback
}

// listedAt is when the listing's last successful run ended.
func listedAt(listing *v1alpha1.InfraResource) *metav1.Time {
	if d := listing.Status.Drift; d != nil {
		t := d.CheckedAt
		return &t
	}
	if last := listing.Status.LastRun; last != nil && last.Result == v1alpha1.RunSucceeded {
		return last.CompletionTime
	}
	return nil
}

// interval is the class's discovery interval.
func interval(d *v1alpha1.ClassDiscovery) time.Duration {
	if d.Interval != nil && d.Interval.Duration > 0 {
		return d.Interval.Duration
	}
	return DefaultInterval
}

// keepListing creates the class's listing resource, or updates its spec to the class's discovery.
func (r *Reconciler) keepListing(ctx context.Context, class *v1alpha1.InfraClass) (*v1alpha1.InfraResource, error) {
	d := class.Spec.Discovery
	want := v1alpha1.InfraResourceSpec{
		ResourceKind: "Discovery",
		Module:       d.Module,
		Variables:    d.Variables,
		RunInputs: v1alpha1.RunInputs{
			Env: class.Spec.Env, KubernetesAccess: class.Spec.KubernetesAccess, WorkloadIdentity: class.Spec.WorkloadIdentity,
			ModuleCredentials: class.Spec.ModuleCredentials, RunnerPool: class.Spec.RunnerPool,
		},
		ReclaimPolicy:              v1alpha1.ReclaimDelete,
		WriteConnectionSecretToRef: &v1alpha1.SecretReference{Namespace: r.Namespace, Name: ListingName(class.Name)},
		Operations: v1alpha1.Operations{Approval: v1alpha1.ApprovalAutomatic, DriftPolicy: v1alpha1.DriftCorrect,
			InterruptedCreates: v1alpha1.InterruptedCreatesResolve, WarmProviders: v1alpha1.WarmProvidersAllowed,
			SyncInterval: &v1alpha1.Duration{Duration: interval(d)}},
	}
	listing := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: ListingName(class.Name)}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, listing, func() error {
		if listing.ResourceVersion != "" && !metav1.IsControlledBy(listing, class) {
			// A resource of that name that is not this class's listing is never taken over.
			return &takenError{name: listing.Name}
		}
		if listing.Labels == nil {
			listing.Labels = map[string]string{}
		}
		listing.Labels[v1alpha1.LabelDiscoveryOf] = v1alpha1.LabelValue(class.Name)
		if err := controllerutil.SetControllerReference(class, listing, r.Scheme()); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(listing.Spec, want) {
			want.DeepCopyInto(&listing.Spec)
		}
		return nil
	})
	return listing, err
}

// takenError is a resource named as the class's listing that is not its listing (not controlled
// by the class).
type takenError struct{ name string }

func (e *takenError) Error() string {
	return fmt.Sprintf("an InfraResource named %s exists and is not this class's discovery listing: rename it, or delete it, for discovery to run", e.name)
}

// dropListing deletes the class's listing resource (its discovered resources stay: they stand for
// objects that exist, and some may be bound).
func (r *Reconciler) dropListing(ctx context.Context, class *v1alpha1.InfraClass) error {
	listing := &v1alpha1.InfraResource{}
	err := r.Get(ctx, types.NamespacedName{Name: ListingName(class.Name)}, listing)
	if err != nil || !metav1.IsControlledBy(listing, class) || !listing.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(r.Delete(ctx, listing))
}

// listingSecret is the Secret the listing's outputs are in: errNotListed before its first
// successful apply.
func listingSecret(listing *v1alpha1.InfraResource) (types.NamespacedName, error) {
	ref := listing.Status.ConnectionSecret
	if listing.Status.ObservedGeneration == 0 || ref == nil {
		return types.NamespacedName{}, errNotListed
	}
	return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, nil
}

// listingVersion is the resourceVersion of the listing's Secret, read as metadata only (its
// candidates may be hundreds of kilobytes): errNotListed before the first listing or while the
// Secret is missing.
func (r *Reconciler) listingVersion(ctx context.Context, listing *v1alpha1.InfraResource) (string, error) {
	key, err := listingSecret(listing)
	if err != nil {
		return "", err
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Secrets.Get(ctx, key, meta); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errNotListed
		}
		return "", err
	}
	return meta.ResourceVersion, nil
}

// candidates reads the listing's published candidates and the version of the Secret they were
// read from: errNotListed before its first successful apply or while its Secret is missing, and a
// parse error (ParseCandidates) as it is.
func (r *Reconciler) candidates(ctx context.Context, listing *v1alpha1.InfraResource) ([]Candidate, string, error) {
	key, err := listingSecret(listing)
	if err != nil {
		return nil, "", err
	}
	secret := &corev1.Secret{}
	if err := r.Secrets.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", errNotListed
		}
		return nil, "", err
	}
	raw, ok := secret.Data[CandidatesOutput]
	if !ok {
		return nil, "", fmt.Errorf("the discovery module has no output %q (a list of id, import_ids, variables)", CandidatesOutput)
	}
	candidates, err := ParseCandidates(raw)
	return candidates, secret.ResourceVersion, err
}

// SetupWithManager registers the reconciler: classes (their spec), their listing resources (a
// listing that ended), and their discovered resources (bound or released: the counts).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).Named("discovery").
		For(&v1alpha1.InfraClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.InfraResource{}, handler.EnqueueRequestsFromMapFunc(classOfResource)).
		Complete(r)
}

// classOfResource maps a listing or discovered resource to its class, by its labels' class name
// (the resource's classRef for a discovered one; the owner for a listing).
func classOfResource(_ context.Context, obj client.Object) []reconcile.Request {
	res, ok := obj.(*v1alpha1.InfraResource)
	if !ok {
		return nil
	}
	switch {
	case res.Labels[v1alpha1.LabelDiscoveryOf] != "":
		if ref := metav1.GetControllerOf(res); ref != nil && ref.Kind == "InfraClass" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ref.Name}}}
		}
	case res.Labels[v1alpha1.LabelDiscoveredBy] != "" && res.Spec.ClassRef != nil:
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: res.Spec.ClassRef.Name}}}
	}
	return nil
}
