package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// The commands run against a real kube-apiserver (test/harness), through the cobra tree with
// --kubeconfig, on objects whose status is set through the status subresource as the controller
// sets it. TestMain makes these fixtures:
//
//   - InfraClass minio-bucket, its module's inputs and outputs in status;
//   - InfraResource team-a-bucket, bound to InfraClaim team-a/bucket: a pending plan with its plan
//     Secret, three runs (the newest failed once) with log Secrets, state serial 4 with versions
//     1-3 in history, a lock the controller reports stale, held on its Lease;
//   - InfraResource bucket-live: no pending plan, a running run without a log, state of lineage
//     "y" whose history (lineage "x") is of another state, a live (not stale) lock;
//   - InfraResource bucket-moved: reported stale under lock L3, but the Lease is held under L4;
//   - InfraClaim team-a/pending, not bound.
const (
	ctrlNS    = "conductor-system"
	claimNS   = "team-a"
	planID    = "3f2a9c1b0d4e"
	failedRun = "9b2d4f10-1111-4c3e-8a5b-2f9e0c7d6a11"
	staleLock = "5d1c8e7a-2b3f-4a6d-9e0f-1a2b3c4d5e6f"
	liveLock  = "7e6f5a4b-3c2d-4e1f-8a9b-0c1d2e3f4a5b"
)

var (
	kubeconfig string
	testClient client.Client
	testKube   kubernetes.Interface
	// base is when the fixtures were made; status times are relative to it, and the commands'
	// clock is 10s after it (after the history versions were written).
	base  time.Time
	clock = func() time.Time { return base.Add(10 * time.Second) }
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kubectl-conductor-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := harness.Start(dir, harness.CRDDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	kubeconfig = env.Kubeconfig
	scheme, err := Scheme()
	if err == nil {
		testClient, err = client.New(env.Config, client.Options{Scheme: scheme})
	}
	if err == nil {
		testKube, err = kubernetes.NewForConfig(env.Config)
	}
	if err == nil {
		base = time.Now().UTC().Truncate(time.Second)
		err = makeFixtures(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "making the fixtures:", err)
		return 1
	}
	return m.Run()
}

func before(d time.Duration) *metav1.Time { t := metav1.NewTime(base.Add(-d)); return &t }

// createWithStatus creates obj, then sets its status (which create ignores) to the one it had.
func createWithStatus(ctx context.Context, obj client.Object, setStatus func()) error {
	if err := testClient.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %s: %w", obj.GetName(), err)
	}
	setStatus()
	if err := testClient.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("status of %s: %w", obj.GetName(), err)
	}
	return nil
}

func resource(name string) *v1alpha1.InfraResource {
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "ObjectStore",
			Module:     v1alpha1.ModuleSource{Source: "git::https://example.org/modules.git//minio-bucket", Version: "v0.1.0"},
			Operations: v1alpha1.Operations{Approval: v1alpha1.ApprovalManual}},
	}
}

// lease holds the state lock of resource name under id, as Terraform's kubernetes backend does.
func lease(ctx context.Context, name, id, who string, created time.Time) error {
	info, err := json.Marshal(statebackend.Lock{ID: id, Operation: "OperationTypeApply", Who: who, Version: "1.12.0", Created: created})
	if err != nil {
		return err
	}
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-tfstate-default-" + statebackend.SuffixFor(name), Namespace: ctrlNS,
			Annotations: map[string]string{"app.terraform.io/lock-info": string(info)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id},
	}
	return testClient.Create(ctx, l)
}

// history writes states of lineage "x" with these serials, so that all but the last are kept.
func history(ctx context.Context, name string, serials ...int64) error {
	h := statebackend.NewStore(testKube, ctrlNS).For(statebackend.SuffixFor(name))
	for _, s := range serials {
		state := fmt.Sprintf(`{"version":4,"terraform_version":"1.12.0","serial":%d,"lineage":"x","outputs":{},"resources":[]}`, s)
		if err := h.Write(ctx, []byte(state)); err != nil {
			return err
		}
	}
	return nil
}

func secret(ctx context.Context, name, key, value string) error {
	return testClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ctrlNS},
		Data: map[string][]byte{key: []byte(value)}})
}

const planText = `Terraform will perform the following actions:

  # minio_s3_bucket.this will be updated in-place
  ~ resource "minio_s3_bucket" "this" {
        id     = "team-a-bucket"
      ~ quota  = 10737418240 -> 21474836480
    }

  # minio_iam_user.reader will be destroyed
  - resource "minio_iam_user" "reader" {
      - name = "team-a-bucket-reader" -> null
    }

  # minio_s3_bucket_versioning.this will be created
  + resource "minio_s3_bucket_versioning" "this" {
      + bucket = "team-a-bucket"
    }

Plan: 1 to add, 1 to change, 1 to destroy.
`

func makeFixtures(ctx context.Context) error {
	for _, ns := range []string{ctrlNS, claimNS} {
		if err := testClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "minio-bucket"}, Spec: v1alpha1.InfraClassSpec{
		ResourceKind: "ObjectStore", Module: resource("").Spec.Module}}
	if err := createWithStatus(ctx, class, func() {
		class.Status.Inputs = []v1alpha1.ModuleInput{
			{Name: "bucket_name", Type: "string", Required: true, Description: "Name of the bucket."},
			{Name: "quota_gib", Type: "number", Description: "Hard quota\nin GiB; 0 for none."},
			{Name: "secret_key", Type: "string", Required: true, Sensitive: true, Description: "Key of the bucket's user."},
			{Name: "tags", Type: "map(string)"},
		}
		class.Status.Outputs = []v1alpha1.ModuleOutput{
			{Name: "endpoint", Description: "S3 endpoint URL."},
			{Name: "secret_key", Sensitive: true, Description: "Secret key of the bucket's user."},
		}
	}); err != nil {
		return err
	}

	ok := &v1alpha1.PlanSummary{Add: 2}
	newest := v1alpha1.RunStatus{Operation: "plan", Result: v1alpha1.RunSucceeded, ID: "c4e8a2f6-3333-4b1d-9c7e-5a6b7c8d9e0f",
		QueuedTime: before(10*time.Minute + 24*time.Second), StartTime: before(10 * time.Minute), CompletionTime: before(10*time.Minute - 41*time.Second), Generation: 3,
		Summary: &v1alpha1.PlanSummary{Add: 1, Change: 1, Destroy: 1}, PlanID: planID,
		Controller: "conductor-tf-7d9f8c6b5-x2k4p", LogSecret: "run-log-c4e8a2f6"}
	failed := v1alpha1.RunStatus{Operation: "apply", Result: v1alpha1.RunFailed, ID: failedRun, StartTime: before(4 * time.Hour),
		CompletionTime: before(4*time.Hour - 95*time.Second), Generation: 2, PlanID: "aa11bb22cc33",
		Controller: "conductor-tf-7d9f8c6b5-x2k4p", LogSecret: "run-log-9b2d4f10",
		Message: "Error: creating bucket: AccessDenied: Access Denied\n  with minio_s3_bucket.this"}
	first := v1alpha1.RunStatus{Operation: "apply", Result: v1alpha1.RunSucceeded, ID: "0a1b2c3d-2222-4e5f-8a9b-c0d1e2f3a4b5",
		StartTime: before(26 * time.Hour), CompletionTime: before(26*time.Hour - 3*time.Minute), Generation: 1, Summary: ok,
		PlanID: "0f0e0d0c0b0a", Controller: "conductor-tf-7d9f8c6b5-q8z7m"}
	// The claims first: the resource's claimRef names its claim by UID, as a bind leaves it.
	claimUIDs := map[string]types.UID{}
	for _, c := range []struct{ name, resource string }{{"bucket", "team-a-bucket"}, {"pending", ""}} {
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: claimNS},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "ObjectStore", ClassName: "minio-bucket", ResourceName: c.resource}}
		if err := createWithStatus(ctx, claim, func() {
			claim.Status.ResourceName = c.resource
			claim.Status.Phase = v1alpha1.ClaimPending
			if c.resource != "" {
				claim.Status.Phase = v1alpha1.ClaimBound
			}
		}); err != nil {
			return err
		}
		claimUIDs[c.name] = claim.UID
	}
	res := resource("team-a-bucket")
	res.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: claimNS, Name: "bucket", UID: claimUIDs["bucket"]}
	res.Spec.GeneratedPasswords = []v1alpha1.GeneratedPassword{{Variable: "secret_key", Length: 32}}
	if err := createWithStatus(ctx, res, func() {
		res.Status.Phase = v1alpha1.ResourceBound
		res.Status.PendingPlan = &v1alpha1.PendingPlan{ID: planID, Reason: "DestructiveChange",
			Summary: v1alpha1.PlanSummary{Add: 1, Change: 1, Destroy: 1}, Generation: res.Generation,
			CreatedAt: *before(10*time.Minute - 41*time.Second), Secret: "plan-team-a-bucket-" + planID,
			Changes: []string{"minio_s3_bucket.this: update", "minio_iam_user.reader: delete",
				"minio_s3_bucket_versioning.this: create"}}
		res.Status.Runs = []v1alpha1.RunStatus{newest, failed, first}
		res.Status.LastRun = &newest
		res.Status.State = &v1alpha1.StateStatus{SecretName: "tfstate-default-team-a-bucket", Serial: 4, Lineage: "x",
			LockID: staleLock, LockHolder: "alice@laptop", LockedSince: before(3 * time.Hour), LockStale: true}
	}); err != nil {
		return err
	}
	live := resource("bucket-live")
	running := v1alpha1.RunStatus{Operation: "apply", Result: v1alpha1.RunRunning, ID: "e5f6a7b8-4444-4c9d-8e7f-6a5b4c3d2e1f",
		StartTime: before(2 * time.Minute), PlanID: "77aa88bb99cc", Controller: "conductor-tf-7d9f8c6b5-x2k4p"}
	if err := createWithStatus(ctx, live, func() {
		live.Status.Runs = []v1alpha1.RunStatus{running}
		live.Status.LastRun = &running
		live.Status.State = &v1alpha1.StateStatus{SecretName: "tfstate-default-bucket-live", Serial: 7, Lineage: "y",
			LockID: liveLock, LockHolder: "conductor@conductor-tf", LockedSince: before(2 * time.Minute)}
	}); err != nil {
		return err
	}
	doubt := resource("db-in-doubt")
	doubt.Spec.Approval = ""
	doubt.Spec.InterruptedCreates = v1alpha1.InterruptedCreatesResolve
	doubt.Spec.ImportIdentities = map[string]string{"kubernetes_secret_v1.b": "team-a/b"}
	checked := v1alpha1.RunStatus{Operation: "plan", Result: v1alpha1.RunSucceeded, ID: "abcdef12-5555-4c9d-8e7f-6a5b4c3d2e1f", StartTime: before(time.Minute),
		Resolutions: []v1alpha1.CreateResolution{
			{Address: "module.main.local_file.a", Decision: "Held", Reason: "no import identity is declared for it (importIdentities)"},
			{Address: "module.main.kubernetes_secret_v1.b", Decision: "Adopted", ID: "team-a/b", Reason: "the object exists and was imported into state"}}}
	if err := createWithStatus(ctx, doubt, func() {
		doubt.Status.LastRun = &checked
		doubt.Status.CreatesPending = []string{"module.main.local_file.a"}
		doubt.Status.CreatesPendingRun = "0badc0de-1111-4c9d-8e7f-6a5b4c3d2e1f"
		doubt.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "aa11bb22cc33", Reason: v1alpha1.ReasonInterruptedCreate,
			Summary: v1alpha1.PlanSummary{Add: 1}, Generation: 1, CreatedAt: *before(time.Minute)}
	}); err != nil {
		return err
	}
	unrecorded := resource("db-unrecorded")
	unrecorded.Spec.Approval = ""
	if err := createWithStatus(ctx, unrecorded, func() {
		unrecorded.Status.CreatesPending = []string{v1alpha1.CreatesUnrecorded}
		unrecorded.Status.CreatesPendingRun = "0badc0de-2222-4c9d-8e7f-6a5b4c3d2e1f"
	}); err != nil {
		return err
	}
	moved := resource("bucket-moved")
	if err := createWithStatus(ctx, moved, func() {
		moved.Status.State = &v1alpha1.StateStatus{SecretName: "tfstate-default-bucket-moved", LockID: "L3",
			LockHolder: "bob@desk", LockedSince: before(5 * time.Hour), LockStale: true}
	}); err != nil {
		return err
	}
	if err := targetFixtures(ctx); err != nil {
		return err
	}
	for _, err := range []error{
		secret(ctx, "plan-team-a-bucket-"+planID, "plan.txt", planText),
		secret(ctx, "run-log-c4e8a2f6", "log", "Initializing modules...\nPlan: 1 to add, 1 to change, 1 to destroy.\n"),
		secret(ctx, "run-log-9b2d4f10", "log", "minio_s3_bucket.this: Creating...\nError: creating bucket: AccessDenied"),
		lease(ctx, "team-a-bucket", staleLock, "alice@laptop", base.Add(-3*time.Hour)),
		lease(ctx, "bucket-live", liveLock, "conductor@conductor-tf", base.Add(-2*time.Minute)),
		lease(ctx, "bucket-moved", "L4", "carol@ci", base.Add(-time.Minute)),
		history(ctx, "team-a-bucket", 1, 2, 3, 4),
		history(ctx, "bucket-live", 1, 2),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// targetFixtures are the objects of TestTargetNamesTheRightObject, in namespace team-b: a claim
// "shared" bound to shared-x1 beside an InfraResource "shared" of another claim, and a Lost claim
// "lost" that still names team-a-bucket, which is team-a/bucket's.
func targetFixtures(ctx context.Context) error {
	if err := testClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}); err != nil {
		return err
	}
	for _, c := range []struct {
		name, resource string
		phase          v1alpha1.ClaimPhase
	}{{"shared", "shared-x1", v1alpha1.ClaimBound}, {"lost", "team-a-bucket", v1alpha1.ClaimLost}} {
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: "team-b"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "ObjectStore", ClassName: "minio-bucket"}}
		if err := createWithStatus(ctx, claim, func() {
			claim.Status.ResourceName, claim.Status.Phase = c.resource, c.phase
		}); err != nil {
			return err
		}
		if c.name == "shared" {
			own := resource("shared-x1")
			own.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "team-b", Name: "shared", UID: claim.UID}
			if err := testClient.Create(ctx, own); err != nil {
				return err
			}
		}
	}
	other := resource("shared")
	other.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "team-c", Name: "shared", UID: "another"}
	return testClient.Create(ctx, other)
}
