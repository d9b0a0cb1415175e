package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// fileResource is a static resource over the file module.
func fileResource(s *scenario, name, content string) *v1alpha1.InfraResource {
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind: s.kind,
			Module:       v1alpha1.ModuleSource{Source: moduleDir, Version: "v1.0.0"},
			Variables: v1alpha1.Variables{
				"path":    js(fmt.Sprintf("%q", filepath.Join(s.dir, name+".txt"))),
				"content": js(fmt.Sprintf("%q", content)),
			},
			ReclaimPolicy: v1alpha1.ReclaimDelete,
			Operations:    v1alpha1.Operations{AllowDestructiveChanges: true},
		},
	}
}

func lease(s *scenario, res string) func() *coordinationv1.Lease {
	return func() *coordinationv1.Lease {
		l, err := kube.CoordinationV1().Leases(stateNamespace).Get(s.ctx, statebackend.LeaseName("default", statebackend.SuffixFor(res)), metav1.GetOptions{})
		if err != nil {
			return &coordinationv1.Lease{}
		}
		return l
	}
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

func syncedCondition(r *v1alpha1.InfraResource) metav1.Condition {
	return condition(r.Status.Conditions, v1alpha1.ConditionSynced)
}

// eventReasons lists the reasons of the events about a resource.
func eventReasons(s *scenario, res string) []string {
	list, err := kube.EventsV1().Events("").List(s.ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + res})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Note)
	}
	return out
}

// holdLock starts a real apply of res's root module that stops at the approval prompt, holding
// the state lock as every Terraform run does, and returns it once the Lease names it. The run is
// pod a's run runID: it reaches the state through pod a's own state server, which names the run in
// the lock it takes, as every run of the controller does.
func holdLock(s *scenario, res *v1alpha1.InfraResource, runID string) *exec.Cmd {
	dir, err := os.MkdirTemp("", "conductor-pod-a-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	ws, err := tfrunner.NewWorkspace(dir, realBinary, tfEnv, 0)
	Expect(err).NotTo(HaveOccurred())
	podA := statebackend.NewServer(kube, stateNamespace, statebackend.DefaultHistoryLimit)
	podA.Store().SetKeys(stateServer.Store().Keyring) // another replica reads the same key Secret
	serverCtx, stop := context.WithCancel(context.Background())
	DeferCleanup(stop)
	Expect(podA.Start(serverCtx, "127.0.0.1:0")).To(Succeed())
	creds, _ := podA.IssueRunAs(runID, stateSuffix(s, res.Name), map[string]string{statebackend.LabelResource: res.Name})
	spec := tfrunner.Spec{
		Module:    tfrunner.Module{Source: moduleDir, Version: "v1.0.0"},
		Backend:   tfrunner.Backend{Type: "http"},
		Variables: map[string]any{"path": filepath.Join(s.dir, res.Name+".txt"), "content": "written by pod a"},
	}
	_, err = ws.Prepare(spec)
	Expect(err).NotTo(HaveOccurred())
	Expect(initWith(s, dir, creds.EnvList())).To(Succeed())
	cmd := exec.Command(realBinary.Path, "apply", "-var-file=conductor.tfvars.json")
	cmd.Dir = dir
	for k, v := range tfEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, creds.EnvList()...)
	stdin, err := cmd.StdinPipe() // kept open: the apply waits at "Enter a value:"
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = stdin.Close() })
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	Eventually(lease(s, res.Name), time.Minute, 200*time.Millisecond).Should(WithTransform(holder, Not(BeEmpty())))
	return cmd
}

var _ = Describe("Pod identity and state locks", func() {
	It("a run killed with its pod is recovered by another pod of the same deployment; a foreign lock is reported, never taken", func() {
		s := newScenario()
		res := fileResource(s, "locks-"+s.ns, "v1")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		Eventually(s.resource(res.Name), timeout, time.Second).Should(WithTransform(syncedCondition, HaveField("Status", metav1.ConditionTrue)))

		By("pod a records a run, starts it, and dies with it (SIGKILL): its lock stays")
		started := metav1.NewTime(time.Now().Add(-time.Second))
		apply := holdLock(s, res, "run-of-pod-a")
		Expect(apply.Process.Kill()).To(Succeed())
		_ = apply.Wait()
		lockID := holder(lease(s, res.Name)())
		Expect(lockID).NotTo(BeEmpty())
		got := s.resource(res.Name)()
		got.Status.LastRun = &v1alpha1.RunStatus{Operation: "apply", StartTime: &started, Result: v1alpha1.RunRunning, Generation: got.Generation,
			ID: "run-of-pod-a", Who: statebackend.Who(), Controller: "conductor-tf-7c9d5-pod-a"}
		Expect(k8s.Status().Update(s.ctx, got)).To(Succeed())

		By("pod b, the new leader, releases the dead run's lock and converges the resource")
		got = s.resource(res.Name)()
		got.Spec.Variables["content"] = js(`"v2"`)
		Expect(k8s.Update(s.ctx, got)).To(Succeed())
		Eventually(func() string { return fileContent(filepath.Join(s.dir, res.Name+".txt")) }, timeout, time.Second).Should(Equal("v2"))
		// The run's own records show it Running (with the Synced of the earlier apply) while its
		// lock is held: wait for its outcome.
		Eventually(s.resource(res.Name), timeout, time.Second).Should(And(
			WithTransform(syncedCondition, HaveField("Status", metav1.ConditionTrue)),
			HaveField("Status.LastRun.Controller", podName),
			HaveField("Status.LastRun.Result", v1alpha1.RunSucceeded),
			HaveField("Status.State.LockID", BeEmpty())))
		Eventually(lease(s, res.Name), 30*time.Second, 200*time.Millisecond).Should(WithTransform(holder, BeEmpty()))
		Eventually(func() []string { return eventReasons(s, res.Name) }, 30*time.Second, time.Second).Should(ContainElement(And(
			HavePrefix("StateLockRecovered"), ContainSubstring(lockID), ContainSubstring(statebackend.Who()))))

		By("a lock held by someone else (a person running terraform by hand) is shown and never taken")
		info, _ := json.Marshal(map[string]any{"ID": "held-by-alice", "Operation": "OperationTypeApply", "Who": "alice@laptop",
			"Version": "1.11.4", "Created": time.Now().UTC().Format(time.RFC3339Nano)})
		l := lease(s, res.Name)()
		l.Spec.HolderIdentity = ptr.To("held-by-alice")
		l.Annotations = map[string]string{"app.terraform.io/lock-info": string(info)}
		_, err := kube.CoordinationV1().Leases(stateNamespace).Update(s.ctx, l, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		got = s.resource(res.Name)()
		got.Spec.Variables["content"] = js(`"v3"`)
		Expect(k8s.Update(s.ctx, got)).To(Succeed())
		Eventually(s.resource(res.Name), timeout, time.Second).Should(And(
			WithTransform(syncedCondition, HaveField("Reason", v1alpha1.ReasonStateLocked)),
			HaveField("Status.State.LockID", "held-by-alice"),
			HaveField("Status.State.LockHolder", "alice@laptop"),
			HaveField("Status.State.LockedSince", Not(BeNil()))))
		Consistently(lease(s, res.Name), 5*time.Second, time.Second).Should(WithTransform(holder, Equal("held-by-alice")))
		Expect(fileContent(filepath.Join(s.dir, res.Name+".txt"))).To(Equal("v2"))

		By("once alice unlocks, the change is applied")
		Expect(statebackend.NewStore(kube, stateNamespace).For(statebackend.SuffixFor(res.Name)).ReleaseLock(s.ctx, "held-by-alice")).To(Succeed())
		Eventually(func() string { return fileContent(filepath.Join(s.dir, res.Name+".txt")) }, timeout, time.Second).Should(Equal("v3"))
		Expect(k8s.Delete(s.ctx, got)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, got) }), timeout, time.Second).Should(BeTrue())
	})
})

var _ = Describe("Metrics", func() {
	It("the metrics endpoint serves every conductor-tf series with the values of real runs", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("metrics-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "measured", s.kind, s.dir, "metrics")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		s.ready(claim)

		families := scrape()
		count := func(name string, labels map[string]string) float64 {
			f, ok := families[name]
			Expect(ok).To(BeTrue(), "series %s missing", name)
			total := 0.0
			for _, m := range f.GetMetric() {
				match := true
				for _, lp := range m.GetLabel() {
					if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
						match = false
					}
				}
				if !match {
					continue
				}
				switch {
				case m.GetHistogram() != nil:
					total += float64(m.GetHistogram().GetSampleCount())
					Expect(m.GetHistogram().GetSampleSum()).To(BeNumerically(">=", 0))
				case m.GetGauge() != nil:
					total += m.GetGauge().GetValue()
				case m.GetCounter() != nil:
					total += m.GetCounter().GetValue()
				}
			}
			return total
		}
		Expect(count("conductor_tf_run_duration_seconds", map[string]string{"operation": "apply", "result": "Succeeded"})).To(BeNumerically(">=", 1))
		Expect(count("conductor_tf_run_wait_seconds", nil)).To(BeNumerically(">=", 1))
		Expect(count("conductor_tf_claim_ready_seconds", nil)).To(BeNumerically(">=", 1))
		Expect(count("conductor_tf_resources", map[string]string{"phase": "Bound"})).To(BeNumerically(">=", 1))
		inFlight := count("conductor_tf_runs_in_flight", nil)
		Expect(inFlight).To(And(BeNumerically(">=", 0), BeNumerically("<=", maxRuns)))
		Expect(count("conductor_tf_state_lock_conflicts_total", nil)).To(BeNumerically(">=", 0))
		Expect(count("conductor_tf_state_locks_recovered_total", nil)).To(BeNumerically(">=", 0))
		Expect(families["conductor_tf_approvals_pending"].GetMetric()).To(HaveLen(6), "one series per reason a plan waits, policy holds included")
		Expect(count("conductor_tf_approvals_pending", nil)).To(BeNumerically(">=", 0))
		// A run's duration is at least the apply itself: the sum is positive, and a run lasts less than
		// the timeout on average. (The sum of the whole suite's runs grows with the suite: 70 runs that
		// wait 20 s each for a runner alone add 1400 s; bounding it by ten timeouts failed at 4568 s.)
		h := families["conductor_tf_run_duration_seconds"].GetMetric()[0].GetHistogram()
		Expect(h.GetSampleSum()).To(BeNumerically(">", 0))
		Expect(h.GetSampleSum() / float64(h.GetSampleCount())).To(BeNumerically("<", timeout.Seconds()))
	})
})

// scrape reads the manager's metrics endpoint, as Prometheus would.
func scrape() map[string]*dto.MetricFamily {
	resp, err := http.Get(metricsURL)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bufio.NewReader(strings.NewReader(string(body))))
	Expect(err).NotTo(HaveOccurred())
	return families
}

// initWith runs init in dir with the run's environment (tfEnv and the extra KEY=VALUE settings).
func initWith(s *scenario, dir string, extra []string) error {
	cmd := exec.CommandContext(s.ctx, realBinary.Path, "init", "-input=false", "-no-color")
	cmd.Dir = dir
	for k, v := range tfEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("init: %w\n%s", err, out)
	}
	return nil
}
