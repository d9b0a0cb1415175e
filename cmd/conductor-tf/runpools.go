package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	runnerpoolcontroller "github.com/conductor-tf/conductor-tf/internal/controller/runnerpool"

	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// runnerHosts are the names runners reach the manager by: --runner-hosts, or the Service
// --runner-service (conductor-tf-runs of config/manager; <release>-runs of the chart) in the
// manager's namespace.
func runnerHosts(o options) []string {
	if o.runnerHosts != "" {
		return strings.Split(o.runnerHosts, ",")
	}
	svc := o.runnerService
	// The first is the one runner pods are given (setupRunnerPools).
	return []string{svc + "." + o.namespace + ".svc", svc, svc + "." + o.namespace, svc + "." + o.namespace + ".svc.cluster.local"}
}

// startRunProtocol serves runner pools (runners.Serve): only runners whose token names their
// pool's ServiceAccount are served.
//
// Runs a predecessor started that runners resume here are vouched for by a resource.Adopter (the
// API server, the state server, the recorder: nothing of the reconciler, registered after this),
// and the reconciler learns of them from the Dispatcher's Resumed channel (Runs.Resumed).
//
// leading says whether this replica leads (leaderClock.Leading with leader election): runners are
// served from the moment it holds the Lease, before its controllers' caches are synced, so that a
// run its predecessor left is adopted before the runner's fence kills it. leader says, when it
// does not lead, where the leader is (leaderAddress.Leader), which its refusals name.
func startRunProtocol(ctx context.Context, o options, kube kubernetes.Interface, mgr ctrl.Manager, state *statebackend.Server, drain *queue.Drain,
	leading func() bool, leader func() string) (*runners.Dispatcher, error) {
	adopter, err := resourcecontroller.NewAdopter(mgr.GetAPIReader(), state, mgr.GetEventRecorder("conductor-tf"), o.podName)
	if err != nil {
		return nil, err
	}
	d, _, err := runners.Serve(ctx, runners.ServeOptions{
		Kube: kube, Namespace: o.namespace, Hosts: runnerHosts(o),
		Address: o.runProtocolAddr, StateAddress: o.runnerStateAddr, State: state,
		Authorize: runners.PoolAuthorizer(mgr.GetClient(), o.namespace), HeartbeatTimeout: o.heartbeatTimeout, FenceGrace: o.fenceGrace,
		CheckPool: runners.PoolChecker(mgr.GetClient()), StateURL: ownStateURL(o), Drain: drain, QueueTimeout: o.queueTimeout,
		Adopt: adopter.Vouch, KeepErrored: state.KeepErrored,
		Leading: leading, Leader: leader,
	})
	return d, err
}

// setupRunnerPools registers the InfraRunnerPool reconciler: runner pods reach this manager
// through the Service --runner-service (the first of runnerHosts), on the ports of --run-protocol-address and
// --runner-state-address, and run --runner-image (else this pod's own image).
func setupRunnerPools(ctx context.Context, o options, kube kubernetes.Interface, mgr ctrl.Manager, d *runners.Dispatcher) error {
	image := o.runnerImage
	if image == "" {
		pod, err := kube.CoreV1().Pods(o.namespace).Get(ctx, o.podName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("--runner-image is empty and this pod's image cannot be read: %w", err)
		}
		for _, c := range pod.Spec.Containers {
			if c.Name == "manager" || image == "" {
				image = c.Image
			}
		}
	}
	_, protoPort, err := net.SplitHostPort(o.runProtocolAddr)
	if err != nil {
		return fmt.Errorf("--run-protocol-address: %w", err)
	}
	_, statePort, err := net.SplitHostPort(o.runnerStateAddr)
	if err != nil {
		return fmt.Errorf("--runner-state-address: %w", err)
	}
	host := runnerHosts(o)[0]
	return (&runnerpoolcontroller.Reconciler{
		Client: mgr.GetClient(), Namespace: o.namespace, Image: image,
		Targets: runnerpoolcontroller.Targets{
			Manager: net.JoinHostPort(host, protoPort), StateURL: "https://" + net.JoinHostPort(host, statePort),
			CAConfigMap: runners.CAName, Audience: runners.Audience,
		},
		Connected: func(pool string) int { return len(d.Runners(pool)) },
	}).SetupWithManager(mgr)
}

// ownStateURL is this pod's own state server for runners (https://POD_IP:port), when the pod's
// address is known: with several replicas the Service may lead a runner's state requests to one
// that is not the leader, which knows no run's credentials. "" leaves the runners' --state-url.
func ownStateURL(o options) string {
	ip := os.Getenv("POD_IP")
	_, port, err := net.SplitHostPort(o.runnerStateAddr)
	if ip == "" || err != nil {
		return ""
	}
	return "https://" + net.JoinHostPort(ip, port)
}
