package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// refuseStateWrites makes the API server refuse every create and update of a Secret in the state
// namespace whose name holds suffix (the state, its history and its pending state), with a
// ValidatingAdmissionPolicy: the state store refusing writes, as an etcd out of space or a quota
// would. It returns once a write is refused, and a func that lifts the refusal.
func refuseStateWrites(ctx context.Context, t *testing.T, kube kubernetes.Interface, suffix string) func() {
	t.Helper()
	adm := kube.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-state"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}}},
			Validations: []admissionv1.Validation{{
				Expression: `!object.metadata.name.contains("` + suffix + `")`, Message: "the state store refuses writes"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-state"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "refuse-state",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": stateNamespace}}}},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + suffix, Namespace: stateNamespace}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := kube.CoreV1().Secrets(stateNamespace).Create(ctx, probe, metav1.CreateOptions{})
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			break
		}
		if err == nil {
			_ = kube.CoreV1().Secrets(stateNamespace).Delete(ctx, probe.Name, metav1.DeleteOptions{})
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never refused a write: %v", err)
		}
	}
	return func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = adm.ValidatingAdmissionPolicies().Delete(ctx, policy.Name, metav1.DeleteOptions{})
	}
}

// TestStateRefusedThenRestartCreatesNothingTwice: a create completes, but the state that records
// it is refused by the state store (and so is the errored state that would keep it); the manager
// is then replaced by one on a new pod (nothing of the old workspace left). Issue 32: the creates
// in doubt were cleared because Terraform ended on its own, so the new manager planned from the
// empty stored state and created everything again. Now they stay until a stored state holds them:
// the new manager's plan is held (InterruptedCreate), and the ledger counts one creation.
func TestStateRefusedThenRestartCreatesNothingTwice(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stateNamespace}}); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs(filepath.Join("testdata", "modules", "ledgerfile"))
	files := filepath.Join(r.dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	const name = "refused"
	ledger := filepath.Join(files, name+".ledger")
	res := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "File", ReclaimPolicy: v1alpha1.ReclaimRetain,
			Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{
				"path": {Raw: []byte(`"` + files + "/" + name + `.txt"`)}, "content": {Raw: []byte(`"x"`)},
				"ledger": {Raw: []byte(`"` + ledger + `"`)}, "seconds": {Raw: []byte(`6`)},
			}},
	}
	if err := r.k8s.Create(ctx, res); err != nil {
		t.Fatal(err)
	}
	start := func(pod string) (func(), string) {
		log := filepath.Join(r.dir, pod+".log")
		c, err := r.env.StartController(r.bin, log, r.tfEnv,
			"--namespace", stateNamespace, "--work-dir", filepath.Join(r.dir, "work-"+pod),
			"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--grace-period", "5s",
			"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--pod-name", pod, "--zap-devel=false",
			"--run-sandbox-write", filepath.Join(r.dir, "files")) // the module's file and ledger
		if err != nil {
			t.Fatal(err)
		}
		return c.Kill, log
	}
	kill, log := start("first")
	defer kill()
	for deadline := time.Now().Add(3 * time.Minute); ledgerCount(ledger) < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the create never started (log %s)", log)
		}
	}
	lift := refuseStateWrites(ctx, t, r.kube, statebackend.SuffixFor(name))
	defer lift()
	// The apply ends: its state, and then its errored state, refused.
	got := &v1alpha1.InfraResource{}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if err := r.k8s.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if l := got.Status.LastRun; l != nil && l.Result == v1alpha1.RunFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apply whose state was refused never ended: %+v (log %s)", got.Status.LastRun, log)
		}
	}
	t.Logf("the run ended: %s; creates in doubt %v", got.Status.LastRun.Message, got.Status.CreatesPending)
	kill()
	lift()

	killSecond, log := start("second")
	defer killSecond() // the second manager was left running after the test (seen: an orphan conductor-tf)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if err := r.k8s.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		synced := ""
		for _, c := range got.Status.Conditions {
			if c.Type == v1alpha1.ConditionSynced {
				synced = c.Reason
			}
		}
		if n := ledgerCount(ledger); n != 1 {
			t.Fatalf("ledger: %d creations after the restart; want 1 (synced %s, log %s)", n, synced, log)
		}
		if synced == v1alpha1.ReasonInterruptedCreate || synced == v1alpha1.ReasonApplied {
			t.Logf("the new manager: %s", synced)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new manager neither held nor applied the resource: %s (log %s)", synced, log)
		}
	}
	time.Sleep(5 * time.Second)
	if n := ledgerCount(ledger); n != 1 {
		t.Fatalf("ledger: %d creations; want 1", n)
	}
}

// ledgerCount is how many creations the ledger file records (0 when it does not exist).
func ledgerCount(path string) int {
	data, _ := os.ReadFile(path)
	return strings.Count(string(data), "created")
}
