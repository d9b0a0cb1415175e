package runnerpool

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/runners"
)

// Targets are where runner pods find the manager: the run protocol's address
// (host:port) and the state server's URL for runners (https://host:port), by the Service
// --runner-service (conductor-tf-runs, or the chart's <release>-runs).
type Targets struct {
	Manager, StateURL string
	// CAConfigMap and CAAudience are the ConfigMap holding the manager's CA (key ca.crt) and the
	// audience of the runners' projected tokens (runners.CAName, runners.Audience).
	CAConfigMap, Audience string
}

// Mount points and lifetimes inside runner pods.
const (
	runnerTokenDir = "/var/run/conductor-tf/token"
	runnerCADir    = "/var/run/conductor-tf/ca"
	// runnerTokenSeconds is the projected token's lifetime: 3600 s (the kubelet renews it at 80 %).
	runnerTokenSeconds = 3600
)

// DeploymentName is the name of pool's Deployment in the manager's namespace.
func DeploymentName(pool string) string { return "conductor-tf-runner-" + pool }

// runnerRunGrants are what a pool's runs get of the runner's container (its --run-env and
// --run-sandbox-read): the variables of spec.env and spec.runEnv, and the paths of
// spec.volumeMounts and spec.runReadPaths, sorted and without repeats.
func runnerRunGrants(pool *v1alpha1.InfraRunnerPool) (env, read []string) {
	env = slices.Clone(pool.Spec.RunEnv)
	for _, e := range pool.Spec.Env {
		env = append(env, e.Name)
	}
	for _, p := range pool.Spec.RunReadPaths {
		read = append(read, string(p))
	}
	for _, m := range pool.Spec.VolumeMounts {
		read = append(read, string(m.MountPath))
	}
	slices.Sort(env)
	slices.Sort(read)
	return slices.Compact(env), slices.Compact(read)
}

// poolMounts are the pool's volumeMounts for the runner's container, each read-only.
func poolMounts(pool *v1alpha1.InfraRunnerPool) []corev1.VolumeMount {
	var mounts []corev1.VolumeMount
	for _, m := range pool.Spec.VolumeMounts {
		mounts = append(mounts, corev1.VolumeMount{Name: m.Name, MountPath: string(m.MountPath), SubPath: m.SubPath, ReadOnly: true})
	}
	return mounts
}

// runnerDeployment is the Deployment of pool's runners in namespace: `conductor-tf runner`, with
// no Kubernetes API token (automountServiceAccountToken false), only a projected token of the
// run protocol's audience and the manager's CA; non-root, a read-only root filesystem, no
// capabilities, and emptyDir working space that dies with the pod. The pool's podLabels,
// podAnnotations, env, volumes and volumeMounts are added; its runs get what runnerRunGrants says.
func runnerDeployment(pool *v1alpha1.InfraRunnerPool, namespace, image string, t Targets) *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "conductor-tf", "app.kubernetes.io/component": "runner", "conductor.io/runner-pool": pool.Name}
	podLabels := maps.Clone(pool.Spec.PodLabels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, labels)
	if pool.Spec.Image != "" {
		image = pool.Spec.Image
	}
	concurrency := max(pool.Spec.Concurrency, 1)
	runEnv, runRead := runnerRunGrants(pool)
	var grants []string
	if len(runEnv) > 0 {
		grants = append(grants, "--run-env", strings.Join(runEnv, ","))
	}
	if len(runRead) > 0 {
		grants = append(grants, "--run-sandbox-read", strings.Join(runRead, ","))
	}
	sa := runners.PoolServiceAccount(pool)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: DeploymentName(pool.Name), Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(pool.Spec.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"conductor.io/runner-pool": pool.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(pool.Spec.PodAnnotations)},
				Spec: corev1.PodSpec{
					ServiceAccountName:           sa,
					AutomountServiceAccountToken: ptr.To(false),
					NodeSelector:                 pool.Spec.NodeSelector,
					Tolerations:                  pool.Spec.Tolerations,
					// At termination a run under way finishes (--drain-timeout 10m), or gets SIGINT
					// then and its grace period (2m) to stop and save state: a rollout of the
					// runners (a new manager image) waits for runs, it does not interrupt them.
					TerminationGracePeriodSeconds: ptr.To[int64](750),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name: "runner", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: append([]string{"runner", "--pool", pool.Name, "--manager", t.Manager, "--state-url", t.StateURL,
							"--ca-file", runnerCADir + "/ca.crt", "--token-file", runnerTokenDir + "/token",
							"--concurrency", strconv.Itoa(int(concurrency)), "--work-dir", "/work", "--grace-period", "2m", "--drain-timeout", "10m",
							"--run-sandbox", "landlock"}, grants...),
						Env: append([]corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
							pool.Spec.Env...),
						Resources: pool.Spec.Resources,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: append([]corev1.VolumeMount{
							{Name: "token", MountPath: runnerTokenDir, ReadOnly: true},
							{Name: "ca", MountPath: runnerCADir, ReadOnly: true},
							{Name: "work", MountPath: "/work"},
							{Name: "tmp", MountPath: "/tmp"},
						}, poolMounts(pool)...),
					}},
					Volumes: append([]corev1.Volume{
						{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
							ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: t.Audience, ExpirationSeconds: ptr.To[int64](runnerTokenSeconds), Path: "token"},
						}}}}},
						{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: t.CAConfigMap}}}},
						{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					}, pool.Spec.Volumes...),
				},
			},
		},
	}
}

// String is for messages: where the pool's runners connect.
func (t Targets) String() string {
	return fmt.Sprintf("%s (state %s)", t.Manager, t.StateURL)
}
