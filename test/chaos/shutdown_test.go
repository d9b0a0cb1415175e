package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// leaderLease is the controller's leader election Lease (cmd/conductor-tf: LeaderElectionID).
const leaderLease = "conductor-tf.conductor.io"

// TestShutdownMidApplyLeavesNoLock stops the controller while an apply holds its state lock through
// the state server, the two ways a pod stops leading: SIGTERM, and a lost leader election (another
// holder takes the leader Lease).
//
// SIGTERM drains (issue 32): the 30 s create under way completes, its outcome is recorded, and the
// process exits with nothing held: one creation in the ledger, no create in doubt, no hold, no
// lock. Before, SIGTERM interrupted it (SIGINT, then SIGKILL after the grace period), which left
// the create in doubt and the next plan held as InterruptedCreate.
//
// Lost leadership stops runs at once (another replica may lead already): past the renew deadline
// the state server refuses them, so no state is written from then on; the runs are killed, their
// credentials revoked and their locks released before the process exits. Issue 17: the process
// exited without draining its runs and the state server, and the lock stayed held. Issue 46: the
// runs got SIGINT and the grace period while the state server kept answering, so a run of the
// old leader wrote state after another manager could lead.
func TestShutdownMidApplyLeavesNoLock(t *testing.T) {
	r := newRig(t)
	dir, env, k8s, kube, bin, tfEnv := r.dir, r.env, r.k8s, r.kube, r.bin, r.tfEnv
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stateNamespace}}); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs(filepath.Join("testdata", "modules", "ledgerfile"))
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, how := range []string{"SIGTERM", "lost leadership"} {
		t.Run(how, func(t *testing.T) {
			name := map[string]string{"SIGTERM": "term", "lost leadership": "lost"}[how]
			res := &v1alpha1.InfraResource{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: v1alpha1.InfraResourceSpec{ResourceKind: "File", ReclaimPolicy: v1alpha1.ReclaimRetain,
					Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
					Variables: v1alpha1.Variables{
						"path": {Raw: []byte(`"` + files + "/" + name + `.txt"`)}, "content": {Raw: []byte(`"x"`)},
						"ledger": {Raw: []byte(`"` + files + "/" + name + `.ledger"`)}, "seconds": {Raw: []byte(`30`)},
					}},
			}
			if err := k8s.Create(ctx, res); err != nil {
				t.Fatal(err)
			}
			c, err := env.StartController(bin, filepath.Join(dir, name+".log"), tfEnv,
				"--namespace", stateNamespace, "--work-dir", filepath.Join(dir, "work-"+name),
				"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--grace-period", "20s", "--leader-elect",
				"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--pod-name", name, "--zap-devel=false",
				"--run-sandbox-write", files) // the module's file and ledger
			if err != nil {
				t.Fatal(err)
			}
			defer c.Kill()
			sfx := statebackend.SuffixFor(name)
			// The slow create is under way (its ledger line written) while the apply holds the lock.
			for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
				lock, _ := statebackend.NewStore(kube, stateNamespace).For(sfx).InspectLock(ctx)
				if _, err := os.Stat(filepath.Join(files, name+".ledger")); err == nil && lock != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the apply never got under way (log %s)", filepath.Join(dir, name+".log"))
				}
			}
			if how == "SIGTERM" {
				c.Stop()
				assertDrained(ctx, t, k8s, filepath.Join(files, name+".ledger"), name)
			} else {
				stealLeadership(ctx, t, kube)
				// Past the renew deadline (cmd/conductor-tf: 10 s) the old leader's state server
				// refuses its runs: nothing it started may write state from then on.
				time.Sleep(10 * time.Second)
				before := stateVersion(ctx, t, kube, sfx)
				exited := make(chan struct{})
				go func() { _, _ = c.Cmd.Process.Wait(); close(exited) }()
				select {
				case <-exited:
				case <-time.After(2 * time.Minute):
					t.Fatal("the controller did not stop after losing its leader Lease")
				}
				if after := stateVersion(ctx, t, kube, sfx); after != before {
					t.Errorf("the state was written after the manager's leadership lapsed (resourceVersion %s, then %s): "+
						"its run went on writing while another manager may lead", before, after)
				}
			}
			lock, err := statebackend.NewStore(kube, stateNamespace).For(sfx).InspectLock(ctx)
			if err != nil || lock != nil {
				t.Errorf("after %s mid-apply: lock %+v (%v); want none", how, lock, err)
			}
			if left := procs.Reap(filepath.Join(dir, "work-"+name), true); left > 0 {
				t.Errorf("after %s: %d processes of the run still running", how, left)
			}
		})
	}
}

// stateVersion is the resourceVersion of the state Secret of suffix ("" when there is none).
func stateVersion(ctx context.Context, t *testing.T, kube kubernetes.Interface, suffix string) string {
	t.Helper()
	s, err := kube.CoreV1().Secrets(stateNamespace).Get(ctx, statebackend.SecretName(statebackend.DefaultWorkspace, suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return s.ResourceVersion
}

// assertDrained checks what a drained apply leaves: the create made once (the ledger, outside
// Terraform), the run recorded as succeeded by the process that ran it, no create in doubt and no
// plan held.
func assertDrained(ctx context.Context, t *testing.T, k8s client.Client, ledger, name string) {
	t.Helper()
	data, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "created"); n != 1 {
		t.Errorf("ledger: %d creations; want 1", n)
	}
	res := &v1alpha1.InfraResource{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	last := res.Status.LastRun
	if last == nil || last.Result != v1alpha1.RunSucceeded {
		t.Errorf("after SIGTERM mid-create: last run %+v; want Succeeded (the drain let it finish)", last)
	}
	if len(res.Status.CreatesPending) > 0 || res.Status.PendingPlan != nil {
		t.Errorf("after SIGTERM mid-create: creates in doubt %v, held plan %+v; want none", res.Status.CreatesPending, res.Status.PendingPlan)
	}
}

// stealLeadership makes another holder the leader, as a new leader would after a partition: the
// controller can no longer renew, and stops leading.
func stealLeadership(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		l, err := kube.CoordinationV1().Leases(stateNamespace).Get(ctx, leaderLease, metav1.GetOptions{})
		if err == nil {
			now := metav1.NewMicroTime(time.Now())
			l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-pod"), LeaseDurationSeconds: ptr.To[int32](3600),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: l.Spec.LeaseTransitions}
			if _, err = kube.CoordinationV1().Leases(stateNamespace).Update(ctx, l, metav1.UpdateOptions{}); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("could not take the leader Lease: %v", err)
		}
	}
}
