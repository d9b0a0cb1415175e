// Package chaos_test kills the real controller with SIGKILL at random points of its applies and
// destroys, again and again, and checks what users fear most from Terraform controllers: a state
// lock left held, a state lost, an object created twice, a claim bound twice. The controller is
// the cmd/conductor-tf binary in its own process group (its tofu children die with it), against a
// real API server, with real tofu and providers; nothing is faked.
package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	stateNamespace = "conductor-system"
	kills          = 20
	claimsPerNS    = 4
)

// startController starts round's controller process.
func startController(t *testing.T, env *harness.Env, bin, dir string, tfEnv map[string]string, round int, syncInterval string) *harness.Controller {
	t.Helper()
	c, err := env.StartController(bin, filepath.Join(dir, fmt.Sprintf("controller-%02d.log", round)), tfEnv,
		"--namespace", stateNamespace, "--work-dir", filepath.Join(dir, "work"),
		"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--max-concurrent-runs", "2", "--sync-interval", syncInterval,
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--grace-period", "5s",
		"--pod-name", fmt.Sprintf("chaos-%02d", round), "--zap-devel=false")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSIGKILLAtRandomPoints(t *testing.T) {
	dir := t.TempDir()
	env, err := harness.Start(dir, harness.CRDDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	k8s, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()

	bin, err := harness.BuildController(dir)
	if err != nil {
		t.Fatal(err)
	}
	tfEnv, err := harness.TerraformEnv(filepath.Join(dir, "home"))
	if err != nil {
		t.Fatal(err)
	}

	files := filepath.Join(dir, "files")
	module, _ := filepath.Abs(filepath.Join("..", "lifecycle", "testdata", "modules", "file"))
	for _, ns := range []string{stateNamespace, "team-a", "team-b"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "files"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "File", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{
				"path":    {Raw: []byte(`"` + files + `/${claim.namespace}-${claim.name}.txt"`)},
				"content": {Raw: []byte(`"${claim.spec.parameters.greeting}"`)},
			},
			// Each round changes a claim's greeting: the file is replaced, through applies that
			// take the state lock, all along the kills.
			Operations: v1alpha1.Operations{AllowDestructiveChanges: true}},
	}
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	var claims []*v1alpha1.InfraClaim
	for _, ns := range []string{"team-a", "team-b"} {
		for i := range claimsPerNS {
			c := &v1alpha1.InfraClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i)},
				Spec: v1alpha1.InfraClaimSpec{ResourceKind: "File",
					Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
					Parameters:                 v1alpha1.Variables{"greeting": {Raw: []byte(`"hello"`)}},
					WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: fmt.Sprintf("c%d-conn", i)}},
			}
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			claims = append(claims, c)
		}
	}

	// passwords records each claim's connection Secret password whenever one is seen: a password
	// that changes is a random_password created twice (the first one's state was lost).
	passwords := map[string]string{}
	createdTwice := 0
	observe := func() {
		for _, c := range claims {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.WriteConnectionSecretToRef.Name}, s); err != nil {
				continue
			}
			key := c.Namespace + "/" + c.Name
			pw := string(s.Data["password"])
			if old, ok := passwords[key]; ok && old != pw && pw != "" {
				createdTwice++
				t.Logf("claim %s: password changed: random_password created twice", key)
			}
			if pw != "" {
				passwords[key] = pw
			}
		}
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	deleted := map[string]bool{}
	midRun := 0
	for round := range kills {
		if round == kills/2 {
			// From here on the kills also hit destroys: half the claims are deleted.
			for _, c := range claims[:len(claims)/2] {
				if err := k8s.Delete(ctx, c); err != nil {
					t.Fatal(err)
				}
				deleted[c.Namespace+"/"+c.Name] = true
			}
		}
		if live := claims[len(claims)/2:]; round > 0 {
			// A surviving claim gets a new greeting: its resource applies again this round.
			target := live[round%len(live)]
			patch := fmt.Sprintf(`{"spec":{"parameters":{"greeting":"round %d"}}}`, round)
			if err := k8s.Patch(ctx, target.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
		c := startController(t, env, bin, dir, tfEnv, round, "3s")
		// Kill at a random point of a run: wait until one runs (up to 10 s), then up to 1.5 s more.
		for deadline := time.Now().Add(10 * time.Second); !c.Busy() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if c.Busy() {
			midRun++
		}
		c.Kill()
		observe()
	}
	// The last controller converges what the kills left, and then has nothing to do: no periodic
	// drift checks, so that it can be stopped between runs.
	final := startController(t, env, bin, dir, tfEnv, kills, "1h")
	defer final.Kill()

	// Everything converges: the surviving claims Bound and Ready, the deleted ones and their
	// resources gone.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pending := converging(ctx, k8s, claims, deleted)
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after %d kills: %v (controller logs in %s)", kills, pending, dir)
		}
		time.Sleep(2 * time.Second)
	}
	observe()
	// Stop it as Kubernetes stops a pod (SIGTERM, then wait), once no run is in flight, so that
	// the locks counted are what the kills left. (What a run cancelled by SIGTERM leaves is the
	// subject of tfrunner's cancellation test.)
	for idle := 0; idle < 10; {
		if final.Busy() {
			idle = 0
		} else {
			idle++
		}
		time.Sleep(50 * time.Millisecond)
	}
	final.Stop()

	// 0 locks left held.
	leases, err := kube.CoordinationV1().Leases(stateNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "lock-tfstate-") && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			held++
			t.Errorf("lock %s left held by %s", l.Name, *l.Spec.HolderIdentity)
		}
	}
	// 0 states lost, 0 double binds: one resource per surviving claim, with its two objects in state.
	var resources v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &resources); err != nil {
		t.Fatal(err)
	}
	boundTo := map[string]string{}
	lost := 0
	for _, r := range resources.Items {
		ref := r.Spec.ClaimRef
		if ref == nil {
			t.Errorf("resource %s has no claim", r.Name)
			continue
		}
		key := ref.Namespace + "/" + ref.Name
		if other, ok := boundTo[key]; ok {
			t.Errorf("claim %s bound twice: %s and %s", key, other, r.Name)
		}
		boundTo[key] = r.Name
		st, found, err := statebackend.Read(ctx, kube, stateNamespace, statebackend.DefaultWorkspace, statebackend.SuffixFor(r.Name))
		if err != nil || !found || st.Resources != 2 {
			lost++
			t.Errorf("resource %s: state found=%v resources=%d err=%v, want its 2 objects", r.Name, found, st.Resources, err)
		}
	}
	if want := len(claims) - len(deleted); len(resources.Items) != want {
		t.Errorf("%d resources for %d surviving claims", len(resources.Items), want)
	}
	if createdTwice > 0 {
		t.Errorf("%d objects created twice", createdTwice)
	}
	if midRun < kills/4 {
		t.Errorf("only %d of %d kills hit a running tofu: the test did not exercise the crash window", midRun, kills)
	}
	recovered := 0
	if events, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=StateLockRecovered"}); err == nil {
		recovered = len(events.Items)
	}
	t.Logf("after %d SIGKILLs (%d in the middle of a run) over %d claims (%d deleted during the kills): "+
		"%d locks held, %d states lost, %d created twice, %d resources for %d claims; %d stale locks recovered",
		kills, midRun, len(claims), len(deleted), held, lost, createdTwice, len(resources.Items), len(claims)-len(deleted), recovered)
}

// converging lists what has not converged yet.
func converging(ctx context.Context, k8s client.Client, claims []*v1alpha1.InfraClaim, deleted map[string]bool) []string {
	var out []string
	for _, c := range claims {
		key := c.Namespace + "/" + c.Name
		got := &v1alpha1.InfraClaim{}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got)
		switch {
		case deleted[key] && apierrors.IsNotFound(err):
			if got.Status.ResourceName != "" {
				out = append(out, key+": resource "+got.Status.ResourceName+" not gone")
			}
		case deleted[key]:
			out = append(out, key+": claim not gone")
		case err != nil:
			out = append(out, key+": "+err.Error())
		case !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady):
			out = append(out, key+": not Ready")
		}
	}
	var resources v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &resources); err == nil {
		for _, r := range resources.Items {
			if ref := r.Spec.ClaimRef; ref != nil && deleted[ref.Namespace+"/"+ref.Name] {
				out = append(out, "resource "+r.Name+" of a deleted claim not gone")
			}
		}
	}
	return out
}
