// Package chaos_test kills the real controller with SIGKILL at random points of its applies,
// destroys and creates that take seconds, again and again, and checks what users fear most from
// Terraform controllers: a state lock left held, a state lost, an object created twice, a claim
// bound twice, a process left running. The controller is the cmd/conductor-tf binary in its own
// process group (its tofu children die with it), against a real API server, with real tofu and
// providers; nothing is faked. Every creation of the module's slow object is counted in a ledger
// file outside Terraform, read whole at the end: creates are counted, not sampled.
package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	stateNamespace = "conductor-system"
	kills          = 20
	claimsPerNS    = 4
	// chaosStateKey is the Secret of the controllers' state encryption passphrase (created by the
	// first).
	chaosStateKey = "conductor-tf-state-key"
)

// startController starts round's controller process.
func startController(t *testing.T, env *harness.Env, bin, dir string, tfEnv map[string]string, round int, syncInterval string) *harness.Controller {
	t.Helper()
	c, err := env.StartController(bin, filepath.Join(dir, fmt.Sprintf("controller-%02d.log", round)), tfEnv,
		"--namespace", stateNamespace, "--work-dir", filepath.Join(dir, "work"),
		"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--max-concurrent-runs", "2", "--sync-interval", syncInterval,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--grace-period", "5s",
		"--pod-name", chaosPod(round), "--zap-devel=false",
		"--state-encryption-secret", chaosStateKey, // states encrypted through every kill
		"--run-sandbox-write", filepath.Join(dir, "files")) // the module's file and ledger
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chaosPod is round's controller's pod name (--pod-name), recorded in the runs it starts.
func chaosPod(round int) string { return fmt.Sprintf("chaos-%02d", round) }

// rig is what a chaos test drives: a control plane, clients of it, the controller binary and the
// environment of its runs, all under dir.
type rig struct {
	dir   string
	env   *harness.Env
	k8s   client.Client
	kube  kubernetes.Interface
	bin   string
	tfEnv map[string]string
}

// newRig starts a control plane in a new temporary directory and builds the controller; the
// control plane stops when the test ends.
func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{dir: t.TempDir()}
	var err error
	if r.env, err = harness.Start(r.dir, harness.CRDDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.env.Stop() })
	if r.k8s, err = r.env.Client(); err != nil {
		t.Fatal(err)
	}
	r.kube = kubernetes.NewForConfigOrDie(r.env.Config)
	if r.bin, err = harness.BuildController(r.dir); err != nil {
		t.Fatal(err)
	}
	if r.tfEnv, err = harness.TerraformEnv(filepath.Join(r.dir, "home")); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSIGKILLAtRandomPoints(t *testing.T) {
	r := newRig(t)
	dir, env, k8s, kube, bin, tfEnv := r.dir, r.env, r.k8s, r.kube, r.bin, r.tfEnv
	ctx := context.Background()

	files := filepath.Join(dir, "files")
	module, _ := filepath.Abs(filepath.Join("testdata", "modules", "ledgerfile"))
	for _, ns := range []string{stateNamespace, "team-a", "team-b"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "files"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "File", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{
				"path":    {Raw: []byte(`"` + files + `/${claim.namespace}-${claim.name}.txt"`)},
				"content": {Raw: []byte(`"${claim.spec.parameters.greeting}"`)},
				"ledger":  {Raw: []byte(`"` + files + `/${claim.namespace}-${claim.name}.ledger"`)},
			},
			// Each round changes a claim's greeting: the file is replaced, through applies that
			// take the state lock, all along the kills.
			Operations: v1alpha1.Operations{AllowDestructiveChanges: true}},
	}
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	var claims []*v1alpha1.InfraClaim
	for _, ns := range []string{"team-a", "team-b"} {
		for i := range claimsPerNS {
			c := &v1alpha1.InfraClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i)},
				Spec: v1alpha1.InfraClaimSpec{ResourceKind: "File",
					Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
					Parameters:                 v1alpha1.Variables{"greeting": {Raw: []byte(`"hello"`)}},
					WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: fmt.Sprintf("c%d-conn", i)}},
			}
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			claims = append(claims, c)
		}
	}

	// passwords records each claim's connection Secret password whenever one is seen: a password
	// that changes is a random_password created twice (the first one's state was lost), which is
	// allowed only after an approval of that claim's held plan (approvals).
	passwords := map[string]string{}
	approvals := map[string]int{}
	createdTwice := 0
	observe := func() {
		for _, c := range claims {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.WriteConnectionSecretToRef.Name}, s); err != nil {
				continue
			}
			key := c.Namespace + "/" + c.Name
			pw := string(s.Data["password"])
			if old, ok := passwords[key]; ok && old != pw && pw != "" {
				if approvals[key] == 0 {
					createdTwice++
				}
				t.Logf("claim %s: password changed: random_password created twice (%d approvals)", key, approvals[key])
			}
			if pw != "" {
				passwords[key] = pw
			}
		}
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	deleted := map[string]bool{}
	midRun, midCreate, rounds := 0, 0, 0
	// Kill kills times, and more (up to twice as many) until an eighth of the kills landed
	// mid-create: a kill is counted as landed only when, just before it, a run was under way with
	// a create recorded as started and not settled (status.createsPending of a Running run).
	for round := 0; round < kills || (midCreate < kills/8 && round < 2*kills); round++ {
		rounds++
		if round == kills/2 {
			// From here on the kills also hit destroys: half the claims are deleted.
			for _, c := range claims[:len(claims)/2] {
				if err := k8s.Delete(ctx, c); err != nil {
					t.Fatal(err)
				}
				deleted[c.Namespace+"/"+c.Name] = true
			}
		}
		if live := claims[len(claims)/2:]; round > 0 {
			// A surviving claim gets a new greeting: its resource applies again this round.
			target := live[round%len(live)]
			patch := fmt.Sprintf(`{"spec":{"parameters":{"greeting":"round %d"}}}`, round)
			if err := k8s.Patch(ctx, target.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
		// Every fourth round a new claim is made and the kill aimed at its first create (the slow
		// object's, 3 s): wait until a create is recorded as started, then kill within 1.5 s.
		aimed := round%4 == 3
		if aimed {
			late := &v1alpha1.InfraClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("late-%d", round)},
				Spec: v1alpha1.InfraClaimSpec{ResourceKind: "File",
					Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
					Parameters:                 v1alpha1.Variables{"greeting": {Raw: []byte(`"hello"`)}},
					WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: fmt.Sprintf("late-%d-conn", round)}},
			}
			if err := k8s.Create(ctx, late); err != nil {
				t.Fatal(err)
			}
			claims = append(claims, late)
		}
		c := startController(t, env, bin, dir, tfEnv, round, "3s")
		if aimed {
			for deadline := time.Now().Add(30 * time.Second); !createUnderWay(ctx, k8s, chaosPod(round)) && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		} else {
			// Kill at a random point of a run: wait until one runs (up to 10 s), then up to 4 s
			// more (the slow create takes 3 s).
			for deadline := time.Now().Add(10 * time.Second); !c.Busy() && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(time.Duration(rng.IntN(4000)) * time.Millisecond)
		}
		if c.Busy() {
			midRun++
		}
		landed := c.Busy() && createUnderWay(ctx, k8s, chaosPod(round))
		c.Kill()
		if landed {
			midCreate++
		}
		observe()
	}
	// The last controller converges what the kills left, and then has nothing to do: no periodic
	// drift checks, so that it can be stopped between runs.
	final := startController(t, env, bin, dir, tfEnv, rounds, "1h")
	defer final.Kill()

	// Everything converges: the surviving claims Bound and Ready, the deleted ones and their
	// resources gone. A plan held because a killed run had started creating is approved, as an
	// operator would after looking for a duplicate; each approval is counted for its claim.
	deadline := time.Now().Add(8 * time.Minute)
	held := map[string]bool{}
	for {
		approveHeld(ctx, t, k8s, approvals, held)
		pending := converging(ctx, k8s, claims, deleted)
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after %d kills: %v (controller logs in %s)", kills, pending, dir)
		}
		time.Sleep(2 * time.Second)
	}
	observe()
	// Stop it as Kubernetes stops a pod (SIGTERM, then wait), once no run is in flight, so that
	// the locks counted are what the kills left. (What a run cancelled by SIGTERM leaves is the
	// subject of tfrunner's cancellation test.)
	for idle := 0; idle < 10; {
		if final.Busy() {
			idle = 0
		} else {
			idle++
		}
		time.Sleep(50 * time.Millisecond)
	}
	final.Stop()

	// 0 locks left held.
	leases, err := kube.CoordinationV1().Leases(stateNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	locksHeld := 0
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "lock-tfstate-") && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			locksHeld++
			t.Errorf("lock %s left held by %s", l.Name, *l.Spec.HolderIdentity)
		}
	}
	// 0 states lost, 0 double binds: one resource per surviving claim, with its two objects in state.
	var resources v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &resources); err != nil {
		t.Fatal(err)
	}
	boundTo := map[string]string{}
	// The states were encrypted by the runs; the store reads them with the controllers' key.
	keys := statebackend.NewKeySource(kube, stateNamespace, chaosStateKey)
	if _, err := keys.Load(ctx, false); err != nil {
		t.Fatalf("the controllers' state key: %v", err)
	}
	store := statebackend.NewStore(kube, stateNamespace)
	store.SetKeys(keys.Keyring)
	lost := 0
	for _, r := range resources.Items {
		ref := r.Spec.ClaimRef
		if ref == nil {
			t.Errorf("resource %s has no claim", r.Name)
			continue
		}
		key := ref.Namespace + "/" + ref.Name
		if other, ok := boundTo[key]; ok {
			t.Errorf("claim %s bound twice: %s and %s", key, other, r.Name)
		}
		boundTo[key] = r.Name
		st, found, err := store.For(statebackend.SuffixOf(r.Status.State.SecretName)).Status(ctx)
		if err != nil || !found || st.Resources != 3 {
			lost++
			t.Errorf("resource %s: state found=%v resources=%d err=%v, want its 3 objects", r.Name, found, st.Resources, err)
		}
	}
	// Every creation of the slow object, from the ledgers: more than one per claim only with as
	// many approvals of a held plan.
	creations, unapproved := 0, 0
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		b, _ := os.ReadFile(filepath.Join(files, c.Namespace+"-"+c.Name+".ledger"))
		n := strings.Count(string(b), "\n")
		creations += n
		if extra := n - 1 - approvals[key]; extra > 0 {
			unapproved += extra
			t.Errorf("claim %s: the slow object was created %d times with %d approvals", key, n, approvals[key])
		}
	}
	// Nothing of a run outlives it: no process of the controllers' runs is left.
	if left := procs.Reap(filepath.Join(dir, "work"), true); left > 0 {
		t.Errorf("%d processes of the killed controllers' runs were still running", left)
	}
	totalApprovals := 0
	for _, n := range approvals {
		totalApprovals += n
	}
	if want := len(claims) - len(deleted); len(resources.Items) != want {
		t.Errorf("%d resources for %d surviving claims", len(resources.Items), want)
	}
	if createdTwice > 0 {
		t.Errorf("%d passwords created twice without an approval", createdTwice)
	}
	if midRun < kills/4 || midCreate < kills/8 {
		t.Errorf("of %d kills only %d hit a running tofu and %d a create under way: the test did not exercise the crash window", rounds, midRun, midCreate)
	}
	recovered := 0
	if events, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=StateLockRecovered"}); err == nil {
		recovered = len(events.Items)
	}
	decisions := map[string]int{}
	for _, reason := range []string{v1alpha1.ReasonCreateAdopted, v1alpha1.ReasonCreateRetried, v1alpha1.ReasonCreateHeld} {
		if events, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason}); err == nil {
			decisions[reason] = len(events.Items)
		}
	}
	// The ledger's slow object is a terraform_data with a local-exec provisioner: it touches the
	// world and has no import identity, so each create in doubt of it is held for a person.
	t.Logf("creates in doubt decided: %d adopted, %d retried, %d held; %d person actions (approvals, abandons) for %d kills mid-create: %.2f holds per kill",
		decisions[v1alpha1.ReasonCreateAdopted], decisions[v1alpha1.ReasonCreateRetried], decisions[v1alpha1.ReasonCreateHeld],
		totalApprovals, midCreate, float64(totalApprovals)/float64(max(midCreate, 1)))
	t.Logf("after %d SIGKILLs (%d in the middle of a run, %d of a create) over %d claims (%d deleted during the kills): "+
		"%d locks held, %d states lost, %d slow creations (%d without an approval), %d passwords created twice without an approval, "+
		"%d held plans approved, %d resources for %d claims; %d stale locks recovered",
		rounds, midRun, midCreate, len(claims), len(deleted), locksHeld, lost, creations, unapproved, createdTwice, totalApprovals,
		len(resources.Items), len(claims)-len(deleted), recovered)
}

// createUnderWay reports whether a run of the controller pod is under way with a create recorded
// as started and not settled: a resource whose last run is Running, started by pod (not a record a
// killed predecessor left), and whose status.createsPending names that run.
func createUnderWay(ctx context.Context, k8s client.Client, pod string) bool {
	var list v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &list); err != nil {
		return false
	}
	for _, r := range list.Items {
		if l := r.Status.LastRun; l != nil && l.Result == v1alpha1.RunRunning && l.Controller == pod && len(r.Status.CreatesPending) > 0 && r.Status.CreatesPendingRun == l.ID {
			return true
		}
	}
	return false
}

// approveHeld does what a person does for creates in doubt, counting each action by claim: it
// approves every plan held with reason InterruptedCreate (annotation approve-plan with its id),
// once per plan, and abandons (conductor.io/abandon=true) the creates in doubt of a resource whose
// Delete reclaim waits for them (CreatesInDoubt), after looking: a deleted claim's ledger object
// is left, and its file gone with the directory.
func approveHeld(ctx context.Context, t *testing.T, k8s client.Client, approvals map[string]int, done map[string]bool) {
	var resources v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &resources); err != nil {
		return
	}
	for _, r := range resources.Items {
		if r.DeletionTimestamp != nil && r.Spec.ClaimRef != nil && r.Annotations[v1alpha1.AnnotationAbandon] != "true" {
			if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionSynced); c != nil && c.Reason == v1alpha1.ReasonCreatesInDoubt {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1alpha1.AnnotationAbandon)
				if err := k8s.Patch(ctx, r.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err == nil {
					approvals[r.Spec.ClaimRef.Namespace+"/"+r.Spec.ClaimRef.Name]++
					t.Logf("abandoned the creates in doubt of deleted %s: %v", r.Name, r.Status.CreatesPending)
				}
			}
		}
		pp := r.Status.PendingPlan
		if pp == nil || pp.Reason != v1alpha1.ReasonInterruptedCreate || done[r.Name+"/"+pp.ID] || r.Spec.ClaimRef == nil {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationApprovePlan, pp.ID)
		if err := k8s.Patch(ctx, r.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			continue
		}
		done[r.Name+"/"+pp.ID] = true
		approvals[r.Spec.ClaimRef.Namespace+"/"+r.Spec.ClaimRef.Name]++
		t.Logf("approved plan %s of %s, held: %v", pp.ID, r.Name, pp.Changes)
	}
}

// converging lists what has not converged yet.
func converging(ctx context.Context, k8s client.Client, claims []*v1alpha1.InfraClaim, deleted map[string]bool) []string {
	var out []string
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		got := &v1alpha1.InfraClaim{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got)
		switch {
		case deleted[key] && apierrors.IsNotFound(err):
			if got.Status.ResourceName != "" {
				out = append(out, key+": resource "+got.Status.ResourceName+" not gone")
			}
		case deleted[key]:
			out = append(out, key+": claim not gone")
		case err != nil:
			out = append(out, key+": "+err.Error())
		case !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady):
			out = append(out, key+": not Ready")
		}
	}
	var resources v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &resources); err == nil {
		for _, r := range resources.Items {
			if ref := r.Spec.ClaimRef; ref != nil && deleted[ref.Namespace+"/"+ref.Name] {
				out = append(out, "resource "+r.Name+" of a deleted claim not gone")
			}
		}
	}
	return out
}
