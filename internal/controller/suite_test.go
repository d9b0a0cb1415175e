package controller_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// The binding suite runs the claim and resource controllers against a real API server (envtest)
// with the CRDs installed and no Terraform: what is tested here is the controller's decisions.
var (
	k8s    client.Client
	env    *harness.Env
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
	Expect((&controller.ClaimReconciler{Client: mgr.GetClient(), Recorder: rec, MaxConcurrentReconciles: 4}).SetupWithManager(mgr)).To(Succeed())
	Expect((&controller.ResourceReconciler{Client: mgr.GetClient(), Recorder: rec, MaxConcurrentReconciles: 4}).SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
