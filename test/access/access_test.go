// Package access_test checks what a run may see and do, with the real controller binary
// (cmd/conductor-tf) started as in a pod (KUBERNETES_SERVICE_HOST/PORT and a KUBECONFIG in its
// environment), a real API server with RBAC, real tofu and the real kubernetes provider. Claims are
// made by a namespace's ServiceAccount that holds only the project's infraclaim-editor role,
// through a token, as an application team would.
package access_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	stateNamespace = "conductor-system"
	timeout        = 3 * time.Minute
)

var (
	env     *harness.Env
	admin   client.Client
	workDir string
	teams   *harness.Teams
	modules string
	// reports is the one directory every run may write besides its workspace
	// (--run-sandbox-write): the modules' reports go there. tools holds the hostile tool, which
	// every run may read (--run-sandbox-read).
	reports, tools string
	// manager is the controller's process.
	manager *harness.Controller
	// registry is a private module registry (see private_test.go).
	registry *harness.ModuleRegistry
)

func TestAccess(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "access")
}

var _ = BeforeSuite(func() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "conductor-access-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	env, err = harness.Start(dir, harness.CRDDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	admin, err = env.Client()
	Expect(err).NotTo(HaveOccurred())
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stateNamespace}})).To(Succeed())
	teams, err = harness.NewTeams(ctx, admin, env.Config)
	Expect(err).NotTo(HaveOccurred())
	modules, err = filepath.Abs(filepath.Join("testdata", "modules"))
	Expect(err).NotTo(HaveOccurred())

	bin, err := harness.BuildController(dir)
	Expect(err).NotTo(HaveOccurred())
	tfEnv, err := harness.TerraformEnv(filepath.Join(dir, "home"))
	Expect(err).NotTo(HaveOccurred())
	// As in a pod: the in-cluster settings are in the manager's environment (and its KUBECONFIG,
	// which StartController sets, as `make run` has it).
	api, err := url.Parse(env.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	tfEnv["KUBERNETES_SERVICE_HOST"], tfEnv["KUBERNETES_SERVICE_PORT"] = api.Hostname(), api.Port()
	// A private module registry, on port 443 of a loopback address of its own so that a
	// TF_TOKEN_<host> variable can name it; runs trust its CA (SSL_CERT_FILE reaches them).
	registry, err = harness.StartModuleRegistryAt(dir, fmt.Sprintf("127.%d.%d.%d:443", 1+mrand.IntN(250), mrand.IntN(250), 1+mrand.IntN(250)))
	Expect(err).NotTo(HaveOccurred(), "the registry listens on port 443: the suite needs root or CAP_NET_BIND_SERVICE")
	DeferCleanup(registry.Close)
	tfEnv["SSL_CERT_FILE"] = registry.CAFile
	workDir = filepath.Join(dir, "work")
	reports, tools = filepath.Join(dir, "reports"), filepath.Join(dir, "tools")
	for _, d := range []string{reports, tools} {
		Expect(os.MkdirAll(d, 0o755)).To(Succeed())
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(tools, "hostile"), "./hostile").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	manager, err = env.StartController(bin, filepath.Join(dir, "controller.log"), tfEnv,
		"--namespace", stateNamespace, "--work-dir", workDir,
		"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--max-concurrent-runs", "2",
		"--run-sandbox-read", tools, "--run-sandbox-write", reports, "--warm-providers", "hashicorp/random",
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--zap-devel=false", "--service-account", controllerAccount)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
})

// controllerAccount is the controller's own ServiceAccount as the suite tells it (--service-account).
// (Not the name the installation gives it, which admission refuses in kubernetesAccess already.)
const controllerAccount = "access-controller-manager"

// team is an application team's namespace and a client that acts as its ServiceAccount, which
// holds only the infraclaim-editor role there.
type team struct {
	ns     string
	client client.Client
}

func newTeam(ctx context.Context) *team {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	c, err := teams.Client(ctx, ns.Name)
	Expect(err).NotTo(HaveOccurred())
	return &team{ns: ns.Name, client: c}
}

// claim asks, as the team, for one resource of kind with these parameters.
func (t *team) claim(ctx context.Context, name, kind string, params map[string]string) *v1alpha1.InfraClaim {
	c := &v1alpha1.InfraClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind, Parameters: v1alpha1.Variables{},
			Resources: v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}}},
	}
	for k, v := range params {
		c.Spec.Parameters[k] = quoted(v)
	}
	Expect(t.client.Create(ctx, c)).To(Succeed())
	return c
}

// resourceOf is the resource bound to the claim, read as the team (its status names it) and then
// as an admin (resources are cluster-scoped: the team cannot read them).
func (t *team) resourceOf(ctx context.Context, c *v1alpha1.InfraClaim) func() *v1alpha1.InfraResource {
	return func() *v1alpha1.InfraResource {
		got := &v1alpha1.InfraClaim{}
		Expect(t.client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		res := &v1alpha1.InfraResource{}
		if got.Spec.ResourceName == "" || admin.Get(ctx, client.ObjectKey{Name: got.Spec.ResourceName}, res) != nil {
			return &v1alpha1.InfraResource{}
		}
		return res
	}
}

// readyCondition is the resource's Ready condition (empty when it has none yet).
func readyCondition(res *v1alpha1.InfraResource) metav1.Condition {
	if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// ready is the reason of the resource's Ready condition.
func ready(res *v1alpha1.InfraResource) string { return readyCondition(res).Reason }

func readyMessage(res *v1alpha1.InfraResource) string { return readyCondition(res).Message }

func quoted(s string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: []byte(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)}
}

// class publishes a class of a fresh kind over one of the suite's modules, its variables taken
// from the claim's parameters of the same names.
func class(ctx context.Context, module string, access *v1alpha1.KubernetesAccess, vars ...string) string {
	return classWith(ctx, module, func(s *v1alpha1.InfraClassSpec) { s.KubernetesAccess = access }, vars...)
}

// classWith is class with the spec changed by set before it is created.
func classWith(ctx context.Context, module string, set func(*v1alpha1.InfraClassSpec), vars ...string) string {
	kind := "Access" + rand.String(6)
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind)},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: filepath.Join(modules, module), Version: "v1"}, Variables: v1alpha1.Variables{}},
	}
	set(&c.Spec)
	for _, v := range vars {
		c.Spec.Variables[v] = apiextensionsv1.JSON{Raw: []byte(`"${claim.spec.parameters.` + v + `}"`)}
	}
	Expect(admin.Create(ctx, c)).To(Succeed())
	Eventually(func() string {
		got := &v1alpha1.InfraClass{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
			return cond.Reason
		}
		return ""
	}, timeout, time.Second).Should(Equal(v1alpha1.ReasonValid))
	return kind
}

// reportDir is a new directory for one spec's reports, inside the one runs may write.
func reportDir() string {
	d, err := os.MkdirTemp(reports, "spec-")
	Expect(err).NotTo(HaveOccurred())
	return d
}

// kubeconfigsLeft lists the granted kubeconfig files present under the controller's work dir.
func kubeconfigsLeft() []string {
	var left []string
	_ = filepath.WalkDir(workDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "conductor.kubeconfig" {
			left = append(left, path)
		}
		return nil
	})
	return left
}
