package runnerpool

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
	targets := Targets{Manager: "conductor-tf-runs.ns.svc:9443", StateURL: "https://conductor-tf-runs.ns.svc:9444",
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

// TestRunnerDeploymentCarriesThePoolsPodSettings: a pool's labels, annotations, env, volumes and
// mounts reach the runner pod, the pool's own labels win, and the runs get exactly the pool's
// variables and mounted paths besides what runEnv and runReadPaths name (issue 45).
func TestRunnerDeploymentCarriesThePoolsPodSettings(t *testing.T) {
	pool := &v1alpha1.InfraRunnerPool{
		ObjectMeta: metav1.ObjectMeta{Name: "azure"},
		Spec: v1alpha1.InfraRunnerPoolSpec{
			PodLabels:      map[string]string{"azure.workload.identity/use": "true", "conductor.io/runner-pool": "other"},
			PodAnnotations: map[string]string{"sidecar.istio.io/inject": "false"},
			Env:            []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}, {Name: "ARM_ENVIRONMENT", Value: "public"}},
			RunEnv:         []string{"AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "HTTPS_PROXY"},
			Volumes: []corev1.Volume{{Name: "bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "corp-ca"}}}}},
			VolumeMounts: []v1alpha1.RunnerVolumeMount{{Name: "bundle", MountPath: "/etc/corp-ca"}},
			RunReadPaths: []v1alpha1.RunPath{"/var/run/secrets/azure/tokens"},
		},
	}
	d := runnerDeployment(pool, "ns", "img:1", Targets{})
	meta := d.Spec.Template.ObjectMeta
	if meta.Labels["azure.workload.identity/use"] != "true" || meta.Labels["conductor.io/runner-pool"] != "azure" ||
		meta.Annotations["sidecar.istio.io/inject"] != "false" {
		t.Fatalf("pod labels %v annotations %v", meta.Labels, meta.Annotations)
	}
	if d.Spec.Selector.MatchLabels["conductor.io/runner-pool"] != "azure" || d.Labels["azure.workload.identity/use"] != "" {
		t.Fatalf("selector %v, deployment labels %v", d.Spec.Selector.MatchLabels, d.Labels)
	}
	c := d.Spec.Template.Spec.Containers[0]
	arg := func(flag string) string { return c.Args[slices.Index(c.Args, flag)+1] }
	if got := arg("--run-env"); got != "ARM_ENVIRONMENT,AZURE_CLIENT_ID,AZURE_FEDERATED_TOKEN_FILE,HTTPS_PROXY" {
		t.Fatalf("--run-env %q", got)
	}
	if got := arg("--run-sandbox-read"); got != "/etc/corp-ca,/var/run/secrets/azure/tokens" {
		t.Fatalf("--run-sandbox-read %q", got)
	}
	names := func(env []corev1.EnvVar) (n []string) {
		for _, e := range env {
			n = append(n, e.Name)
		}
		return n
	}
	if got := names(c.Env); !slices.Equal(got, []string{"POD_NAME", "HTTPS_PROXY", "ARM_ENVIRONMENT"}) {
		t.Fatalf("container env %v", got)
	}
	if m := c.VolumeMounts[len(c.VolumeMounts)-1]; m.MountPath != "/etc/corp-ca" || !m.ReadOnly ||
		d.Spec.Template.Spec.Volumes[len(d.Spec.Template.Spec.Volumes)-1].Name != "bundle" {
		t.Fatalf("mounts %v volumes %v", c.VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
}

// TestRefusedVolume: a pool may project a ServiceAccount token for a cloud's audience (pool-level
// IRSA without the webhook), never one for the API server or the run protocol, which its runs
// could read (they may read every mounted volume).
func TestRefusedVolume(t *testing.T) {
	token := func(audience string) v1alpha1.InfraRunnerPoolSpec {
		return v1alpha1.InfraRunnerPoolSpec{Volumes: []corev1.Volume{{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}, {ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, Path: "t"}}}}}}}}
	}
	for audience, refused := range map[string]bool{"": true, "conductor-tf-runner": true, "sts.amazonaws.com": false} {
		pool := &v1alpha1.InfraRunnerPool{Spec: token(audience)}
		if got := refusedVolume(pool) != ""; got != refused {
			t.Errorf("audience %q: refused %v, want %v (%q)", audience, got, refused, refusedVolume(pool))
		}
	}
}
