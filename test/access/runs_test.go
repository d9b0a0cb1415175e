package access_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 18: runs without the controller's credentials.
var _ = Describe("What a run may see", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("a module's local-exec finds no Kubernetes credentials in its environment", func() {
		t := newTeam(ctx)
		kind := class(ctx, "envprobe", nil, "report")
		report := filepath.Join(reportDir(), "env")
		c := t.claim(ctx, "probe", kind, map[string]string{"report": report})
		Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))

		data, err := os.ReadFile(report)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, line := range strings.Split(string(data), "\n") {
			name, value, _ := strings.Cut(line, "=")
			names = append(names, name)
			Expect(value).NotTo(ContainSubstring(env.Kubeconfig), "no variable points at the controller's kubeconfig (%s)", name)
		}
		Expect(names).To(ContainElement("PATH"), "the report is the run's environment")
		for _, forbidden := range []string{"KUBECONFIG", "KUBE_CONFIG_PATH", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
			Expect(names).NotTo(ContainElement(forbidden))
		}

		By("a module that manages Kubernetes objects, in a class that grants nothing, cannot")
		kube := class(ctx, "kubeaccess", nil, "namespace", "name")
		denied := t.claim(ctx, "denied", kube, map[string]string{"namespace": t.ns, "name": "cm-denied"})
		Eventually(t.resourceOf(ctx, denied), timeout, time.Second).
			Should(WithTransform(ready, BeElementOf(v1alpha1.ReasonApplyFailed, v1alpha1.ReasonPlanFailed)))
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: "cm-denied"}, &corev1.ConfigMap{})).
			To(Satisfy(apierrors.IsNotFound))
	})

	It("a module's local-exec cannot open the controller's kubeconfig nor another run's working directory (issue 33)", func() {
		other := newTeam(ctx)
		probe := class(ctx, "envprobe", nil, "report")
		dir := reportDir()
		// Another tenant's run, whose working directory stays on disk.
		victim := other.claim(ctx, "victim", probe, map[string]string{"report": filepath.Join(dir, "victim-env")})
		Eventually(other.resourceOf(ctx, victim), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))

		t := newTeam(ctx)
		hunt := class(ctx, "filehunt", nil, "report", "paths", "kubeconfig")
		report := filepath.Join(dir, "found")
		// A run's rendered variables (sensitive ones included) do not outlive it (issue 65 item 1):
		// what stays of the other tenant's run is its working directory, root module and all.
		// (Other classes' runs may be running now, with their variables: the victim's has ended.)
		victimDir := filepath.Join(workDir, "runs", other.resourceOf(ctx, victim)().Name)
		Expect(victimDir).To(BeADirectory())
		Expect(filepath.Join(victimDir, "conductor.tfvars.json")).NotTo(BeAnExistingFile(), "no variables file is left once its run ended")
		others, err := filepath.Glob(filepath.Join(workDir, "runs", "*", "main.tf"))
		Expect(err).NotTo(HaveOccurred())
		Expect(others).NotTo(BeEmpty(), "the other tenant's working directory is on disk")
		c := t.claim(ctx, "hunt", hunt, map[string]string{"report": report, "paths": strings.Join(others, " "), "kubeconfig": env.Kubeconfig})
		Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))

		data, err := os.ReadFile(report)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("the hunt's report:\n%s", data)
		var readable, denied []string
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			verdict, path, _ := strings.Cut(line, " ")
			if verdict == "readable" {
				readable = append(readable, path)
			} else {
				denied = append(denied, path)
			}
		}
		Expect(readable).To(HaveLen(1), "only the run's own variables file opens; the report:\n%s", data)
		Expect(readable[0]).To(HaveSuffix("conductor.tfvars.json"))
		Expect(denied).To(ContainElement(env.Kubeconfig))
		Expect(len(denied)).To(BeNumerically(">=", 2), "the other tenant's working directory was tried: %s", data)
	})

	It("a class that grants a ServiceAccount: the run can do exactly what its RBAC allows, and reading state Secrets is refused", func() {
		t := newTeam(ctx)
		// The platform team's account for the module, in the controller's namespace, allowed
		// ConfigMaps in the team's namespace only.
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: "configmaps-" + t.ns}}
		Expect(admin.Create(ctx, sa)).To(Succeed())
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "configmaps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
		Expect(admin.Create(ctx, role)).To(Succeed())
		Expect(admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "configmaps"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: stateNamespace, Name: sa.Name}},
		})).To(Succeed())
		kind := class(ctx, "kubeaccess", &v1alpha1.KubernetesAccess{ServiceAccountName: sa.Name}, "namespace", "name", "read_secret")

		allowed := t.claim(ctx, "allowed", kind, map[string]string{"namespace": t.ns, "name": "cm-allowed", "read_secret": ""})
		Eventually(t.resourceOf(ctx, allowed), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))
		cm := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: "cm-allowed"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("written-by", "conductor-tf run"))
		res := t.resourceOf(ctx, allowed)()
		Expect(res.Spec.KubernetesAccess).To(Equal(&v1alpha1.KubernetesAccess{ServiceAccountName: sa.Name}), "copied from the class")
		state := stateNamespace + "/" + res.Status.State.SecretName

		By("reading the state Secret of the resource it manages is refused")
		thief := t.claim(ctx, "thief", kind, map[string]string{"namespace": t.ns, "name": "cm-thief", "read_secret": state})
		Eventually(t.resourceOf(ctx, thief), timeout, time.Second).
			Should(WithTransform(ready, BeElementOf(v1alpha1.ReasonApplyFailed, v1alpha1.ReasonPlanFailed)))
		Expect(readyMessage(t.resourceOf(ctx, thief)())).To(ContainSubstring("forbidden"))
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: "cm-thief"}, &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound))

		By("writing outside what the account is granted is refused")
		outside := t.claim(ctx, "outside", kind, map[string]string{"namespace": stateNamespace, "name": "cm-outside", "read_secret": ""})
		Eventually(t.resourceOf(ctx, outside), timeout, time.Second).
			Should(WithTransform(ready, BeElementOf(v1alpha1.ReasonApplyFailed, v1alpha1.ReasonPlanFailed)))
		Expect(readyMessage(t.resourceOf(ctx, outside)())).To(ContainSubstring("forbidden"))
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: stateNamespace, Name: "cm-outside"}, &corev1.ConfigMap{})).To(Satisfy(apierrors.IsNotFound))

		By("the token lives in the workspace only while a run runs: none is left once no run is under way")
		for _, c := range []*v1alpha1.InfraClaim{thief, outside} {
			name := t.resourceOf(ctx, c)().Name
			Expect(t.client.Delete(ctx, c)).To(Succeed())
			Eventually(func() error { return admin.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.InfraResource{}) }, timeout, time.Second).
				Should(Satisfy(apierrors.IsNotFound))
		}
		Expect(kubeconfigsLeft()).To(BeEmpty())

		By("the team itself reads no state Secret either")
		Expect(t.client.Get(ctx, client.ObjectKey{Namespace: stateNamespace, Name: res.Status.State.SecretName}, &corev1.Secret{})).
			To(Satisfy(apierrors.IsForbidden))

		By("reclaim runs with the same grant: deleting the claim destroys the ConfigMap")
		Expect(t.client.Delete(ctx, allowed)).To(Succeed())
		Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: t.ns, Name: "cm-allowed"}, &corev1.ConfigMap{})
		}, timeout, time.Second).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() error { return admin.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }, timeout, time.Second).
			Should(Satisfy(apierrors.IsNotFound))
		Expect(kubeconfigsLeft()).To(BeEmpty())
	})

	It("a class that names the controller's or a runner pool's ServiceAccount runs nothing: refused at admission, or ServiceAccountForbidden", func() {
		// Issue 33: kubernetesAccess could name the controller's own account, or a pool's, and so
		// hand its credentials to a run.
		By("the names the installation gives those accounts are refused at admission (CEL)")
		for _, account := range []string{"conductor-tf-controller-manager", "conductor-tf-runner-any"} {
			c := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "reserved-" + rand.String(6)},
				Spec: v1alpha1.InfraClassSpec{ResourceKind: "Reserved", Module: v1alpha1.ModuleSource{Source: filepath.Join(modules, "kubeaccess"), Version: "v1"},
					RunInputs: v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: account}}}}
			err := admin.Create(ctx, c)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", account, err)
			Expect(err.Error()).To(ContainSubstring("cannot be granted to runs"))
		}

		By("any other name the controller's account or a pool's has is refused by the controller")
		t := newTeam(ctx)
		pool := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "access-" + rand.String(5)},
			Spec: v1alpha1.InfraRunnerPoolSpec{ServiceAccountName: "pool-account-" + rand.String(5)}}
		Expect(admin.Create(ctx, pool)).To(Succeed())
		DeferCleanup(func() { _ = admin.Delete(ctx, pool) })
		for account, whose := range map[string]string{
			controllerAccount:            "the controller's own",
			pool.Spec.ServiceAccountName: "runner pool " + pool.Name + "'s",
		} {
			kind := class(ctx, "kubeaccess", &v1alpha1.KubernetesAccess{ServiceAccountName: account}, "namespace", "name")
			c := t.claim(ctx, "reserved-"+rand.String(4), kind, map[string]string{"namespace": t.ns, "name": "cm-reserved"})
			Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonServiceAccountForbidden)), account)
			Expect(readyMessage(t.resourceOf(ctx, c)())).To(ContainSubstring(whose))
		}
		Expect(kubeconfigsLeft()).To(BeEmpty(), "no token was requested for either")
	})

	It("a class that names a ServiceAccount that does not exist runs nothing: ServiceAccountNotFound", func() {
		t := newTeam(ctx)
		kind := class(ctx, "kubeaccess", &v1alpha1.KubernetesAccess{ServiceAccountName: "nobody"}, "namespace", "name")
		c := t.claim(ctx, "orphan", kind, map[string]string{"namespace": t.ns, "name": "cm-orphan"})
		Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonServiceAccountNotFound)))
		Expect(readyMessage(t.resourceOf(ctx, c)())).To(ContainSubstring(stateNamespace + "/nobody"))
	})
})
