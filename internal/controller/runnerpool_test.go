package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestRunnerDeploymentMountsNoAPICredentials(t *testing.T) {
	pool := &v1alpha1.InfraRunnerPool{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](3), Concurrency: 4, ServiceAccountName: "aws-runner",
			NodeSelector: map[string]string{"pool": "infra"}},
	}
	targets := RunnerPoolTargets{Manager: "conductor-tf-runs.ns.svc:9443", StateURL: "https://conductor-tf-runs.ns.svc:9444",
		CAConfigMap: "conductor-tf-runner-ca", Audience: "conductor-tf-runner"}
	d := runnerDeployment(pool, "ns", "img:1", targets)
	pod := d.Spec.Template.Spec
	if d.Name != "conductor-tf-runner-gpu" || d.Namespace != "ns" || *d.Spec.Replicas != 3 {
		t.Fatalf("deployment %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || pod.ServiceAccountName != "aws-runner" {
		t.Fatal("the runner pod mounts the ServiceAccount's API token")
	}
	if !*pod.SecurityContext.RunAsNonRoot || pod.NodeSelector["pool"] != "infra" {
		t.Fatalf("pod security context / placement: %+v %v", pod.SecurityContext, pod.NodeSelector)
	}
	c := pod.Containers[0]
	if c.Image != "img:1" || !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Fatalf("container %s security %+v", c.Image, c.SecurityContext)
	}
	if !slices.Contains(c.Args, "--concurrency") || c.Args[slices.Index(c.Args, "--concurrency")+1] != "4" ||
		c.Args[slices.Index(c.Args, "--manager")+1] != targets.Manager {
		t.Fatalf("args %v", c.Args)
	}
	var token *corev1.ServiceAccountTokenProjection
	for _, v := range pod.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					token = s.ServiceAccountToken
				}
			}
		}
		if v.Secret != nil {
			t.Fatalf("runner pods mount Secret %s", v.Secret.SecretName)
		}
	}
	if token == nil || token.Audience != "conductor-tf-runner" {
		t.Fatalf("projected token %+v: want one of the run protocol's audience only", token)
	}
	pool.Spec.Image = "own:2"
	if got := runnerDeployment(pool, "ns", "img:1", targets).Spec.Template.Spec.Containers[0].Image; got != "own:2" {
		t.Fatalf("pool image ignored: %s", got)
	}
}
