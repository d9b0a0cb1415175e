package lifecycle_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	runnerpoolcontroller "github.com/conductor-tf/conductor-tf/internal/controller/runnerpool"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// runnerProcess is a `conductor-tf runner` process in a process group of its own (a runner pod:
// killing the group kills its Terraform and provider processes too), with its log.
type runnerProcess struct {
	cmd *exec.Cmd
	log string
}

// kill kills the runner and everything it started, as a deleted pod's kill does.
func (r *runnerProcess) kill() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	_, _ = r.cmd.Process.Wait()
}

func (r *runnerProcess) logText() string { return fileContent(r.log) }

func ctx() context.Context { return context.Background() }

// runnerToken is a token of sa for audience (none: the API server's default audience).
func runnerToken(sa string, audiences ...string) string {
	tr, err := kube.CoreV1().ServiceAccounts(stateNamespace).CreateToken(ctx(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// filesDir is the directory of every scenario's files (the file module writes outside Terraform).
func filesDir() string {
	d := filepath.Join(suiteDir, "files")
	Expect(os.MkdirAll(d, 0o755)).To(Succeed())
	return d
}

// startRunner starts a runner of pool named name with token, as the pool's Deployment would: the
// CA from the ConfigMap the manager publishes, no Kubernetes credentials in its environment.
func startRunner(bin, pool, name, token string) *runnerProcess {
	return startRunnerVia(bin, pool, name, token, runProtocolAddr)
}

// startRunnerVia is startRunner with the run protocol reached at manager (a proxy of the test's).
func startRunnerVia(bin, pool, name, token, manager string) *runnerProcess {
	dir := filepath.Join(suiteDir, "runner-"+name)
	Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
	cm, err := kube.CoreV1().ConfigMaps(stateNamespace).Get(ctx(), runners.CAName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	Expect(os.WriteFile(caFile, []byte(cm.Data[runners.CAKey]), 0o600)).To(Succeed())
	Expect(os.WriteFile(tokenFile, []byte(token), 0o600)).To(Succeed())
	logPath := filepath.Join(dir, "runner.log")
	logFile, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, "runner", "--name", name, "--pool", pool, "--manager", manager,
		"--state-url", runnerStateURL, "--ca-file", caFile, "--token-file", tokenFile, "--concurrency", "1",
		"--heartbeat-interval", "1s", "--work-dir", filepath.Join(dir, "work"), "--terraform-path", realBinary.Path,
		"--run-sandbox-write", filesDir()) // the file module writes its file there
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TF_CLI_CONFIG_FILE=" + tfEnv["TF_CLI_CONFIG_FILE"], "SSL_CERT_FILE=" + tfEnv["SSL_CERT_FILE"]}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(cmd.Start()).To(Succeed())
	r := &runnerProcess{cmd: cmd, log: logPath}
	DeferCleanup(r.kill)
	return r
}

var _ = Describe("Runner pools", Ordered, func() {
	const pool, sa = "lifecycle-pool", "lifecycle-runner"
	var bin string

	BeforeAll(func() {
		var err error
		bin, err = harness.BuildController(suiteDir)
		Expect(err).NotTo(HaveOccurred())
		for _, name := range []string{sa, "other-runner"} {
			Expect(k8s.Create(ctx(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: name}})).To(Succeed())
		}
		Expect(k8s.Create(ctx(), &v1alpha1.InfraRunnerPool{
			ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec:       v1alpha1.InfraRunnerPoolSpec{ServiceAccountName: sa},
		})).To(Succeed())
	})

	It("refuses runners without a token of the pool's ServiceAccount for the run protocol", func() {
		apiAudience := startRunner(bin, pool, "api-audience", runnerToken(sa))
		otherAccount := startRunner(bin, pool, "other-account", runnerToken("other-runner", runners.Audience))
		Eventually(apiAudience.logText, 30*time.Second, time.Second).Should(ContainSubstring("Unauthenticated"))
		Eventually(otherAccount.logText, 30*time.Second, time.Second).Should(
			ContainSubstring("may not serve pool " + pool + ": the pool's runners are system:serviceaccount:" + stateNamespace + ":" + sa))
		Consistently(func() map[string]int { return dispatcher.Runners(pool) }, 3*time.Second, 500*time.Millisecond).Should(BeEmpty())
	})

	It("provisions and reclaims a class's claim on a runner process, and none of it runs in the manager", func() {
		s := newScenario()
		runner := startRunner(bin, pool, "runner-a", runnerToken(sa, runners.Audience))
		Eventually(func() map[string]int { return dispatcher.Runners(pool) }, 30*time.Second, 500*time.Millisecond).Should(HaveKey("runner-a"))
		By("the pool's Deployment mounts no API token, and its status counts the connected runner")
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: stateNamespace, Name: runnerpoolcontroller.DeploymentName(pool)}, dep)).To(Succeed())
		Expect(*dep.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
		Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(sa))
		Eventually(func() int32 {
			p := &v1alpha1.InfraRunnerPool{}
			Expect(k8s.Get(s.ctx, client.ObjectKey{Name: pool}, p)).To(Succeed())
			return p.Status.ConnectedRunners
		}, 40*time.Second, time.Second).Should(BeNumerically("==", 1))
		class := fileClass("pooled-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) { c.Spec.RunnerPool = pool })
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(k8s.Delete, s.ctx, class)
		claim := fileClaim(s.ns, "pooled", s.kind, s.dir, "from a runner")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		Expect(res.Spec.RunnerPool).To(Equal(pool))
		path := filepath.Join(s.dir, s.ns+"-pooled.txt")
		Expect(fileContent(path)).To(HavePrefix("hello from a runner"))
		Expect(runs(res.Name)).To(BeZero(), "no plan or apply of it ran in the manager's pool")
		Expect(runner.logText()).To(ContainSubstring(`"key":"` + res.Name + `"`))
		_, err := stateSecret(s.ctx, res.Name)
		Expect(err).NotTo(HaveOccurred(), "the state went through the state server for runners")

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout, time.Second).Should(BeTrue())
		Expect(fileContent(path)).To(HavePrefix("<"), "destroyed by the runner")
		destroys := 0
		for _, line := range strings.Split(runner.logText(), "\n") {
			if strings.Contains(line, `"msg":"run ended"`) && strings.Contains(line, `"op":"destroy"`) {
				destroys++
			}
		}
		Expect(destroys).To(Equal(1), "one destroy, on the runner")
		runner.kill()
	})

	It("fences a runner frozen mid-create past its lease while its Terraform goes on: created once, the state has it, no lock left", func() {
		// Issue 32: the manager gave the run up at the heartbeat timeout and released its lock and
		// credentials while the runner's Terraform was still creating; the state it then sent was
		// refused, and the next run held the create as interrupted (or, had the create not been
		// recorded, made it again). Now the run is a lease: the manager waits for the lease plus
		// the fence grace (5 s + 10 s here), the runner freezes its run when it wakes with an
		// expired lease and renews it, and the run completes as if nothing happened.
		s := newScenario()
		runner := startRunner(bin, pool, "runner-frozen", runnerToken(sa, runners.Audience))
		res, ledger := ledgerResource(s, "pooled-frozen-"+s.ns, 12)
		res.Spec.RunnerPool = pool
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		By("the create is under way: its ledger line is written and its start recorded")
		Eventually(func() int { return ledgerLines(ledger) }, timeout, 100*time.Millisecond).Should(Equal(1))
		Eventually(func() []string { return s.resource(res.Name)().Status.CreatesPending }, timeout, 100*time.Millisecond).
			Should(ConsistOf("module.main.terraform_data.this"))
		By("the runner process is frozen for 8 s (past its 5 s lease, within lease + grace) while its Terraform goes on")
		Expect(syscall.Kill(runner.cmd.Process.Pid, syscall.SIGSTOP)).To(Succeed())
		time.Sleep(8 * time.Second)
		Expect(dispatcher.Runners(pool)).To(HaveKey("runner-frozen"), "the run is not given up within the fence")
		Expect(syscall.Kill(runner.cmd.Process.Pid, syscall.SIGCONT)).To(Succeed())

		readyAt(s, res.Name)
		got := s.resource(res.Name)()
		Expect(got.Status.LastRun.Result).To(Equal(v1alpha1.RunSucceeded))
		Expect(got.Status.CreatesPending).To(BeEmpty())
		Expect(got.Status.PendingPlan).To(BeNil(), "nothing is held")
		Consistently(func() int { return ledgerLines(ledger) }, 3*time.Second, 500*time.Millisecond).Should(Equal(1), "created once")
		state, found, err := stateServer.Store().For(stateSuffix(s, res.Name)).Read(s.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(string(state)).To(ContainSubstring(`"terraform_data"`), "the state has the object")
		Expect(statebackend.NewStore(kube, stateNamespace).For(stateSuffix(s, res.Name)).InspectLock(s.ctx)).To(BeNil())
		Expect(runner.logText()).To(And(ContainSubstring("run lease expired"), ContainSubstring("run lease renewed")),
			"the fence froze the run and let it go on once renewed")
		Expect(eventReasons(s, res.Name)).NotTo(ContainElement(ContainSubstring("was lost mid-run")))
	})

	// Issue 46 item 7: a live runner cut off from the run protocol (a proxy the test controls)
	// while its state server stays reachable: the runner freezes its run, and kills it at the
	// fence grace less runners.KillLatency after its lease (8 s here), before the manager gives
	// the run up (lease + grace) and releases its lock; the next run, on another runner, is then
	// the only writer.
	It("fences a runner cut off past its fence while its state server stays reachable: the run is dead before it is given up, and the next run is the only writer", func() {
		s := newScenario()
		link, err := harness.StartPartition(runProtocolAddr)
		Expect(err).NotTo(HaveOccurred())
		cutOff := startRunnerVia(bin, pool, "runner-cut", runnerToken(sa, runners.Audience), link.Addr())
		res, ledger := ledgerResource(s, "pooled-cut-"+s.ns, 30)
		res.Spec.RunnerPool = pool
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, 100*time.Millisecond).Should(Equal(1))
		Eventually(func() []string { return s.resource(res.Name)().Status.CreatesPending }, timeout, 100*time.Millisecond).
			Should(ConsistOf("module.main.terraform_data.this"))
		link.Cut()
		cutAt := time.Now()
		startRunner(bin, pool, "runner-d", runnerToken(sa, runners.Audience))

		Eventually(func() []string { return eventReasons(s, res.Name) }, time.Minute, 100*time.Millisecond).Should(
			ContainElement(ContainSubstring("runner runner-cut of pool " + pool + " was lost mid-run")))
		givenUp := time.Since(cutAt)
		Expect(cutOff.logText()).To(ContainSubstring("run lease not renewed: killing its processes"), "the runner killed its run itself")
		Expect(procs.Reap(filepath.Join(suiteDir, "runner-runner-cut", "work"), true)).To(BeZero(),
			"no process of the cut-off run was left when the manager gave it up")
		GinkgoWriter.Printf("run protocol cut; the run given up %s later, its processes gone by then\n", givenUp.Round(100*time.Millisecond))

		By("the next run, on the other runner, holds the create that had started; approved, it is the only writer")
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonInterruptedCreate))
		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, s.resource(res.Name)().Status.PendingPlan.ID)
		readyAt(s, res.Name)
		Expect(ledgerLines(ledger)).To(Equal(2), "created again once, on approval")
		state, found, err := stateServer.Store().For(stateSuffix(s, res.Name)).Read(s.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(string(state)).To(ContainSubstring(`"terraform_data"`), "the state has the object the next run made")
		Expect(statebackend.NewStore(kube, stateNamespace).For(stateSuffix(s, res.Name)).InspectLock(s.ctx)).To(BeNil())
	})

	It("gives up a run whose runner is killed mid-apply, releases its lock, and holds the interrupted create until approved on another runner", func() {
		s := newScenario()
		first := startRunner(bin, pool, "runner-b", runnerToken(sa, runners.Audience))
		res, ledger := ledgerResource(s, "pooled-ledger-"+s.ns, 30)
		res.Spec.RunnerPool = pool
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, 100*time.Millisecond).Should(Equal(1))
		Eventually(func() []string { return s.resource(res.Name)().Status.CreatesPending }, timeout, 100*time.Millisecond).
			Should(ConsistOf("module.main.terraform_data.this"))
		killedAt := time.Now()
		first.kill()

		Eventually(func() []string { return eventReasons(s, res.Name) }, 30*time.Second, 200*time.Millisecond).Should(
			ContainElement(ContainSubstring("runner runner-b of pool " + pool + " was lost mid-run")))
		GinkgoWriter.Printf("runner death noticed within %s\n", time.Since(killedAt).Round(time.Millisecond))
		Eventually(func() (*statebackend.Lock, error) {
			return statebackend.NewStore(kube, stateNamespace).For(stateSuffix(s, res.Name)).InspectLock(s.ctx)
		}, 30*time.Second, 200*time.Millisecond).Should(BeNil(), "the dead run's lock is released")

		By("the next run, on another runner, holds the create that had started")
		startRunner(bin, pool, "runner-c", runnerToken(sa, runners.Audience))
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonInterruptedCreate))
		got := s.resource(res.Name)()
		Expect(got.Status.PendingPlan).NotTo(BeNil())
		Consistently(func() int { return ledgerLines(ledger) }, 3*time.Second, 500*time.Millisecond).Should(Equal(1), "nothing is created again unasked")

		By("approving the held plan creates it once")
		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, got.Status.PendingPlan.ID)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, time.Second).Should(Equal(2))
		readyAt(s, res.Name)
		Expect(runs(res.Name)).To(BeZero(), "no plan or apply of it ran in the manager's pool")
		Expect(fmt.Sprint(dispatcher.Runners(pool))).To(ContainSubstring("runner-c"))

		Expect(k8s.Delete(s.ctx, s.resource(res.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout, time.Second).Should(BeTrue())
	})
})
