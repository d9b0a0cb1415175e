package claim_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	claimctrl "github.com/conductor-tf/conductor-tf/internal/controller/claim"
	"github.com/conductor-tf/conductor-tf/internal/controller/readypool"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/controller/sharing"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// The binding suite runs the claim, resource and ready-pool controllers against a real API server (envtest)
// with the CRDs installed and no Terraform: what is tested here is the controller's decisions.
var (
	k8s    client.Client
	env    *harness.Env
	teams  *harness.Teams
	cancel context.CancelFunc
	scheme = runtime.NewScheme()
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "controller")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	dir, err := os.MkdirTemp("", "conductor-envtest-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	env, err = harness.Start(dir, harness.CRDDir())
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	rec := mgr.GetEventRecorder("conductor-tf")
	Expect((&claimctrl.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, MaxConcurrentReconciles: 4,
		ConnectionSecretCheck: time.Second, Namespace: "default", SharedJoinRefresh: 500 * time.Millisecond}).SetupWithManager(mgr)).To(Succeed())
	Expect((&sharing.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Grace: sharingGrace}).SetupWithManager(mgr)).To(Succeed())
	resources, err := resource.New(resource.Options{Client: mgr.GetClient(), Recorder: rec, MaxConcurrentReconciles: 4, SharedGrace: sharingGrace})
	Expect(err).NotTo(HaveOccurred())
	Expect(resources.SetupWithManager(mgr)).To(Succeed())
	Expect((&readypool.Reconciler{Client: mgr.GetClient(), Recorder: rec}).SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	teams, err = harness.NewTeams(ctx, k8s, env.Config)
	Expect(err).NotTo(HaveOccurred())
})

// asTeam is a client of namespace ns's application team: a ServiceAccount there that holds only
// the project's infraclaim-editor role, through a token. Claims of tenancy specs are made with it.
func asTeam(ctx context.Context, ns string) client.Client {
	c, err := teams.Client(ctx, ns)
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
