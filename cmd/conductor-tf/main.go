// Command conductor-tf is the controller manager: it binds InfraClaims to InfraResources, provisions
// resources from InfraClasses, and runs Terraform/OpenTofu for them. It is the only place that reads
// flags and the environment; everything below it takes plain values.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	conductorv1alpha1 "github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller"
)

func main() {
	var (
		metricsAddr string
		probeAddr   string
		leaderElect bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles.")
	var workers int
	flag.IntVar(&workers, "max-concurrent-reconciles", 4, "Reconciles of each kind that run at once.")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(conductorv1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "conductor-tf.conductor.io",
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	claims := &controller.ClaimReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("conductor-tf"), MaxConcurrentReconciles: workers,
	}
	if err := claims.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the claim controller")
		os.Exit(1)
	}
	resources := &controller.ResourceReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("conductor-tf"), MaxConcurrentReconciles: workers,
	}
	if err := resources.SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the resource controller")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))

	log.Info("starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
