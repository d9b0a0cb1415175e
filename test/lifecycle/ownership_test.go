package lifecycle_test

// Issue 17: the controller never destroys, duplicates or discloses infrastructure it does not own.
// Each spec here failed on main at b05cd2f (before the fix) and names what it saw there.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// stateSuffix is the state suffix the controller recorded for a resource.
func stateSuffix(s *scenario, name string) string {
	var sfx string
	Eventually(func() string {
		if st := s.resource(name)().Status.State; st != nil {
			sfx = statebackend.SuffixOf(st.SecretName)
		}
		return sfx
	}, timeout, 100*time.Millisecond).ShouldNot(BeEmpty())
	return sfx
}

// ledgerLines counts the creations the ledger module recorded in path.
func ledgerLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// killRun SIGKILLs every process of the resource's run (the binary wrapper, Terraform, plugins,
// provisioners: every process working in its workspace), as they die with their pod or node. It
// returns how many it killed. The wrapper cannot log the end of a command killed so; killRun logs
// it, so that the suite's count of overlapping commands (maxOverlap) stays right.
func killRun(res string) int {
	ws := filepath.Join(runsDir, res)
	entries, _ := os.ReadDir("/proc")
	killed := map[string]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == ws {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[e.Name()] = true
			}
		}
	}
	logKilledEnds(killed)
	return len(killed)
}

// logKilledEnds appends to the wrapper's log an end line for each command started by one of the
// killed processes that has none.
func logKilledEnds(killed map[string]bool) {
	b, err := os.ReadFile(runLog)
	if err != nil {
		return
	}
	open := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !killed[f[1]] {
			continue
		}
		if f[0] == "start" {
			open[f[1]] = strings.Join(f[2:], " ")
		} else {
			delete(open, f[1])
		}
	}
	log, err := os.OpenFile(runLog, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer log.Close()
	for pid, rest := range open {
		fmt.Fprintf(log, "end %s %s\n", pid, rest)
	}
}

// deleteInBackground deletes a resource a spec leaves, without waiting for its reclaim: resources
// left behind are drift-checked every syncInterval for the rest of the suite.
// ledgerResource is a resource of the ledger module named name in s: each create of its one
// object appends a line to the returned ledger file, then takes seconds.
func ledgerResource(s *scenario, name string, seconds int) (*v1alpha1.InfraResource, string) {
	ledger := filepath.Join(s.dir, "ledger")
	src, _ := filepath.Abs("testdata/modules/ledger")
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
			Variables:     v1alpha1.Variables{"ledger": js(`"` + ledger + `"`), "name": js(`"one"`), "seconds": js(strconv.Itoa(seconds))},
			ReclaimPolicy: v1alpha1.ReclaimDelete},
	}, ledger
}

func deleteInBackground(s *scenario, name string) {
	_ = k8s.Delete(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

var _ = Describe("Ownership: what a resource may touch", func() {
	It("gives x-1 and x-1-s two states, each keeping its own file", func() {
		// Seen on b05cd2f: SuffixFor turned x-1 into x-1-s; the second resource planned against
		// the first one's state and its first apply replaced the first one's file.
		s := newScenario()
		base := "pair-" + s.ns[len("app-"):] + "-1"
		first, second := fileResource(s, base, "first"), fileResource(s, base+"-s", "second")
		Expect(k8s.Create(s.ctx, first)).To(Succeed())
		DeferCleanup(deleteInBackground, s, first.Name)
		readyAt(s, first.Name)
		Expect(k8s.Create(s.ctx, second)).To(Succeed())
		DeferCleanup(deleteInBackground, s, second.Name)
		readyAt(s, second.Name)
		Expect(stateSuffix(s, first.Name)).NotTo(Equal(stateSuffix(s, second.Name)))
		Expect(fileContent(filepath.Join(s.dir, first.Name+".txt"))).To(Equal("first"))
		Expect(fileContent(filepath.Join(s.dir, second.Name+".txt"))).To(Equal("second"))
	})

	It("treats a claimRef without a UID as a reservation: no outputs reach the claim, and its deletion reclaims nothing", func() {
		// Seen on b05cd2f: the reserved resource was Bound, wrote the connection Secret into the
		// claim's namespace, and deleting the claim (never bound) destroyed it.
		s := newScenario()
		res := fileResource(s, "reserved-"+s.ns, "reserved")
		res.Spec.Capacity = v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}
		res.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: s.ns, Name: "too-big"}
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		claim := fileClaim(s.ns, "too-big", s.kind, s.dir, "x")
		claim.Spec.Resources.Requests["storage"] = resource.MustParse("100Gi")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		readyAt(s, res.Name)
		conn := func() error {
			return k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "too-big-conn"}, &corev1.Secret{})
		}
		Consistently(func() v1alpha1.ResourcePhase { return s.resource(res.Name)().Status.Phase }, 3*time.Second, 500*time.Millisecond).
			Should(Equal(v1alpha1.ResourceAvailable))
		Expect(gone(conn)()).To(BeTrue(), "no output reaches a namespace whose claim is not bound")
		Expect(s.claim(claim)().Status.Phase).To(Equal(v1alpha1.ClaimPending))

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKeyFromObject(claim), &v1alpha1.InfraClaim{}) }), timeout).Should(BeTrue())
		Consistently(func() v1alpha1.ResourcePhase { return s.resource(res.Name)().Status.Phase }, 4*time.Second, 500*time.Millisecond).
			Should(Equal(v1alpha1.ResourceAvailable))
		Expect(s.resource(res.Name)().DeletionTimestamp).To(BeNil())
		Expect(fileContent(filepath.Join(s.dir, res.Name+".txt"))).To(Equal("reserved"))
	})

	It("never destroys an orphaned state that a resource of the same name was refused", func() {
		// Seen on b05cd2f: the refused resource's deletion ran destroy on the orphan's state and
		// deleted the Retain'd file and the orphaned state.
		s := newScenario()
		old := fileResource(s, "kept-"+s.ns, "kept")
		old.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
		Expect(k8s.Create(s.ctx, old)).To(Succeed())
		readyAt(s, old.Name)
		orphan := statebackend.SecretName("default", stateSuffix(s, old.Name))
		Expect(k8s.Delete(s.ctx, s.resource(old.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: old.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())

		again := fileResource(s, old.Name, "kept")
		Expect(k8s.Create(s.ctx, again)).To(Succeed())
		Eventually(synced(s, again.Name), timeout, time.Second).Should(reason(v1alpha1.ReasonAdoptionRefused))
		Expect(k8s.Delete(s.ctx, s.resource(again.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: again.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(fileContent(filepath.Join(s.dir, old.Name+".txt"))).To(Equal("kept"))
		sec, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, orphan, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(sec.Labels).To(HaveKeyWithValue(statebackend.LabelOrphanedFrom, old.Name))
	})

	It("keeps a Bound resource whose deletion was asked for until its claim is gone", func() {
		// Seen on b05cd2f: the Bound resource was destroyed at once, under its claim.
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("inuse-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "used", s.kind, s.dir, "in use")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		Expect(res.Finalizers).To(ContainElement(v1alpha1.FinalizerInUse))
		Expect(k8s.Delete(s.ctx, res)).To(Succeed())
		Eventually(func() metav1.Condition {
			return condition(s.resource(res.Name)().Status.Conditions, v1alpha1.ConditionReady)
		}, timeout, time.Second).
			Should(HaveField("Reason", v1alpha1.ReasonResourceInUse))
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix(v1alpha1.ReasonResourceInUse)))
		Consistently(func() string { return fileContent(filepath.Join(s.dir, s.ns+"-used.txt")) }, 3*time.Second, time.Second).Should(Equal("hello in use"))

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-used.txt"))).To(HavePrefix("<"), "Delete destroyed the file once the claim was gone")
	})

	It("keeps a Delete resource whose state is missing until an operator abandons its infrastructure", func() {
		// Seen on b05cd2f: destroy was skipped without a state and the resource was deleted; the
		// file was left behind silently.
		s := newScenario()
		res := fileResource(s, "lost-"+s.ns, "lost")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		readyAt(s, res.Name)
		Expect(statebackend.NewStore(kube, stateNamespace).For(stateSuffix(s, res.Name)).Delete(s.ctx)).To(Succeed())
		Expect(k8s.Delete(s.ctx, s.resource(res.Name)())).To(Succeed())
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonStateMissing))
		Consistently(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }, 3*time.Second, time.Second).Should(Succeed())

		annotate(s, res.Name, v1alpha1.AnnotationAbandon, "true")
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix(v1alpha1.ReasonAbandoned)))
		Expect(fileContent(filepath.Join(s.dir, res.Name+".txt"))).To(Equal("lost"), "abandoned: the infrastructure is left")
	})

	It("holds a plan that would create again what a killed run had started creating, until it is approved", func() {
		// Seen on b05cd2f: the next run created the object again (two ledger lines) unasked.
		s := newScenario()
		res, ledger := ledgerResource(s, "ledger-"+s.ns, 8)
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, 100*time.Millisecond).Should(Equal(1))
		Eventually(func() []string { return s.resource(res.Name)().Status.CreatesPending }, timeout, 100*time.Millisecond).
			Should(ConsistOf("module.main.terraform_data.this"), "the create that started is recorded while it runs")
		Expect(killRun(res.Name)).To(BeNumerically(">", 0))

		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonInterruptedCreate))
		got := s.resource(res.Name)()
		Expect(got.Status.PendingPlan).NotTo(BeNil())
		Expect(got.Status.PendingPlan.Reason).To(Equal(v1alpha1.ReasonInterruptedCreate))
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring("module.main.terraform_data.this"))
		Consistently(func() int { return ledgerLines(ledger) }, 4*time.Second, 500*time.Millisecond).Should(Equal(1), "nothing is created again unasked")

		By("approving the held plan creates it and clears the record")
		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, got.Status.PendingPlan.ID)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, time.Second).Should(Equal(2))
		readyAt(s, res.Name)
		Expect(s.resource(res.Name)().Status.CreatesPending).To(BeEmpty())
	})
})
