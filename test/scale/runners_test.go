//go:build scale

package scale_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/test/harness"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// benchPool is the runner pool of -runners mode.
const benchPool = "bench"

// runnerPoolArgs are the controller's flags that serve runner pools on loopback ports.
func runnerPoolArgs(t *testing.T) (args []string, protocol, state string) {
	protocol, state = apiserver.FreeAddr(t), apiserver.FreeAddr(t)
	return []string{"--run-protocol-address", protocol, "--runner-state-address", state,
		"--runner-hosts", "127.0.0.1", "--runner-image", "bench"}, protocol, state
}

// startRunnerPool creates the pool (its ServiceAccount, the InfraRunnerPool) and starts count
// runner processes of perRunner runs each, as the pool's pods would run, once the controller has
// published its CA. It returns a func that stops them.
func startRunnerPool(t *testing.T, ctx context.Context, env *harness.Env, k8s client.Client, bin, dir string,
	tfEnv map[string]string, protocol, state string, count, perRunner int) func() {
	kube := kubernetes.NewForConfigOrDie(env.Config)
	const sa = "bench-runner"
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: sa}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: benchPool},
		Spec: v1alpha1.InfraRunnerPoolSpec{ServiceAccountName: sa, Concurrency: int32(perRunner)}}); err != nil {
		t.Fatal(err)
	}
	var ca *corev1.ConfigMap
	waitFor(t, time.Minute, func() bool {
		var err error
		ca, err = kube.CoreV1().ConfigMaps(stateNamespace).Get(ctx, runners.CAName, metav1.GetOptions{})
		return err == nil
	})
	tr, err := kube.CoreV1().ServiceAccounts(stateNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{runners.Audience}, ExpirationSeconds: ptr.To[int64](7200)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	caFile, tokenFile := filepath.Join(dir, "runner-ca.crt"), filepath.Join(dir, "runner-token")
	_ = os.WriteFile(caFile, []byte(ca.Data[runners.CAKey]), 0o600)
	_ = os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600)
	var cmds []*exec.Cmd
	for i := range count {
		name := fmt.Sprintf("runner-%d", i)
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "runner", "--name", name, "--pool", benchPool, "--manager", protocol, "--state-url", "https://"+state,
			"--ca-file", caFile, "--token-file", tokenFile, "--concurrency", fmt.Sprint(perRunner),
			"--work-dir", filepath.Join(dir, name), "--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TF_CLI_CONFIG_FILE=" + tfEnv["TF_CLI_CONFIG_FILE"]}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	waitFor(t, time.Minute, func() bool {
		p := &v1alpha1.InfraRunnerPool{}
		return k8s.Get(ctx, client.ObjectKey{Name: benchPool}, p) == nil && int(p.Status.ConnectedRunners) == count
	})
	return func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
			_, _ = c.Process.Wait()
		}
	}
}
