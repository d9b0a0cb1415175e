package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// identityKills is how many SIGKILLs TestSIGKILLMidCreateWithIdentities aims at creates.
const identityKills = 6

// TestSIGKILLMidCreateWithIdentities kills the controller in the middle of creates of a module that
// declares import identities (issue 35): each create in doubt must be decided without a person,
// adopted when the object exists or made when it does not, and nothing made twice. The goal: 0 holds
// per kill, 0 duplicates. The first two claims are the colliding pair of issue 46 — x-y of team-c
// and y of team-c-x, alike under `${claim.namespace}-${claim.name}` — whose identities name their
// resources: a kill mid-create of either must not adopt the other's object.
func TestSIGKILLMidCreateWithIdentities(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, nsB = "team-c", "team-c-x"
	for _, n := range []string{stateNamespace, ns, nsB} {
		if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	// The module's runs get the sample's ServiceAccount, which may manage Secrets.
	if err := harness.ApplyFiles(ctx, r.k8s, "config/samples/rook_minio_rbac.yaml"); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs(filepath.Join("testdata", "modules", "slowsecret"))
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "tokens"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "Token", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: module, Version: "v1"},
			RunInputs: v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: "conductor-tf-module-rook-minio"}},
			Variables: v1alpha1.Variables{
				"namespace": {Raw: []byte(`"${claim.namespace}"`)},
				"name":      {Raw: []byte(`"${resource.name}-token"`)},
				"ledger":    {Raw: []byte(`"${resource.name}"`)},
			},
			ImportIdentities: map[string]string{"kubernetes_secret_v1.token": "${claim.namespace}/${resource.name}-token"}},
	}
	if err := r.k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	// The token arrives about 3 s after its Secret is made, as a token controller would fill it.
	go fillTokens(ctx, r, ns, 3*time.Second)
	go fillTokens(ctx, r, nsB, 3*time.Second)
	// uids records the first UID of each claim's Secret: another UID later is the object made twice.
	uids, recreated := map[string]types.UID{}, 0
	observe := func() {
		var all []corev1.Secret
		for _, n := range []string{ns, nsB} {
			var list corev1.SecretList
			if err := r.k8s.List(ctx, &list, client.InNamespace(n), client.HasLabels{"conductor.io/ledger"}); err != nil {
				return
			}
			all = append(all, list.Items...)
		}
		for _, s := range all {
			key := s.Labels["conductor.io/ledger"]
			if old, ok := uids[key]; ok && old != s.UID {
				recreated++
				t.Errorf("the Secret of %s was made again (uid %s, then %s)", key, old, s.UID)
			}
			uids[key] = s.UID
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 35))
	var claims []*v1alpha1.InfraClaim
	midCreate := 0
	for round := range identityKills {
		claimNS, name := ns, fmt.Sprintf("t%d", round)
		switch round { // the colliding pair
		case 0:
			name = "x-y"
		case 1:
			claimNS, name = nsB, "y"
		}
		c := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: claimNS, Name: name},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "Token",
				Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
				WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: fmt.Sprintf("t%d-conn", round)}},
		}
		if err := r.k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		claims = append(claims, c)
		pod := 100 + round
		ctl := startController(t, r.env, r.bin, r.dir, r.tfEnv, pod, "3s")
		for deadline := time.Now().Add(60 * time.Second); !createUnderWay(ctx, r.k8s, chaosPod(pod)) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(2500)) * time.Millisecond)
		landed := ctl.Busy() && createUnderWay(ctx, r.k8s, chaosPod(pod))
		ctl.Kill()
		if landed {
			midCreate++
		}
		observe()
	}
	final := startController(t, r.env, r.bin, r.dir, r.tfEnv, 200, "1h")
	defer final.Kill()

	// Everything converges with no person: a plan held for creates in doubt is a failure.
	held := map[string]bool{}
	for deadline := time.Now().Add(5 * time.Minute); ; {
		observe()
		var resources v1alpha1.InfraResourceList
		if err := r.k8s.List(ctx, &resources); err == nil {
			for _, res := range resources.Items {
				if pp := res.Status.PendingPlan; pp != nil && pp.Reason == v1alpha1.ReasonInterruptedCreate {
					held[res.Name] = true
				}
			}
		}
		ready := 0
		for _, c := range claims {
			got := &v1alpha1.InfraClaim{}
			if r.k8s.Get(ctx, client.ObjectKeyFromObject(c), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
				ready++
			}
		}
		if ready == len(claims) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d claims Ready after 5 minutes; held for creates in doubt: %v", ready, len(claims), held)
		}
		time.Sleep(time.Second)
	}
	decisions := map[string]int{}
	for _, reason := range []string{v1alpha1.ReasonCreateAdopted, v1alpha1.ReasonCreateRetried, v1alpha1.ReasonCreateHeld} {
		if events, err := r.kube.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason}); err == nil {
			decisions[reason] = len(events.Items)
		}
	}
	if len(held) > 0 || decisions[v1alpha1.ReasonCreateHeld] > 0 {
		t.Errorf("creates held for a person: %v (%d CreateHeld events)", held, decisions[v1alpha1.ReasonCreateHeld])
	}
	if len(uids) != len(claims) {
		t.Errorf("%d Secrets for %d claims", len(uids), len(claims))
	}
	// Each claim's object is its own: the Secret its identity names, in its namespace, made for its
	// resource (the colliding pair included).
	for _, c := range claims {
		got := &v1alpha1.InfraClaim{}
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			t.Fatal(err)
		}
		res := got.Status.ResourceName
		sec := &corev1.Secret{}
		if err := r.k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: res + "-token"}, sec); err != nil || sec.Labels["conductor.io/ledger"] != res {
			t.Errorf("claim %s/%s: its Secret %s-token: %v, ledger %q; want its own, made for %s", c.Namespace, c.Name, res, err, sec.Labels["conductor.io/ledger"], res)
		}
	}
	if midCreate < identityKills/2 {
		t.Errorf("only %d of %d kills landed mid-create: the test did not exercise the crash window", midCreate, identityKills)
	}
	t.Logf("after %d SIGKILLs (%d of a create under way) over %d claims of a module with import identities: "+
		"%d adopted, %d retried, %d held; %d objects made twice; %.2f holds per kill",
		identityKills, midCreate, len(claims), decisions[v1alpha1.ReasonCreateAdopted], decisions[v1alpha1.ReasonCreateRetried],
		decisions[v1alpha1.ReasonCreateHeld], recreated, float64(len(held))/float64(max(midCreate, 1)))
}

// fillTokens gives every ledger Secret of namespace ns older than after a token, until ctx ends.
func fillTokens(ctx context.Context, r *rig, ns string, after time.Duration) {
	for ctx.Err() == nil {
		list, err := r.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "conductor.io/ledger"})
		if err == nil {
			for _, s := range list.Items {
				if len(s.Data["token"]) == 0 && time.Since(s.CreationTimestamp.Time) >= after {
					_, _ = r.kube.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.MergePatchType,
						[]byte(`{"data":{"token":"dG9rZW4="}}`), metav1.PatchOptions{})
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}
