package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Short timings, in the ratio of the manager's (15 s / 10 s / 2 s).
const (
	testLease   = 3 * time.Second
	testRenew   = 2 * time.Second
	testRetry   = 200 * time.Millisecond
	testBuckets = 32
)

// replica is one Coordinator running in the test, as a manager replica runs it.
type replica struct {
	*Coordinator
	cancel context.CancelFunc
	done   chan struct{} // closed when Start returned, with err
	err    error
}

// stop stops the replica gracefully and fails t unless Start returns, without an error, within
// 10 s (saying which buckets it still holds).
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not stop: it still holds %v", r.Identity(), r.Held())
	}
}

func startReplica(t *testing.T, ns, pod string, kube kubernetes.Interface) *replica {
	t.Helper()
	return startReplicaWith(t, ns, pod, kube, nil)
}

// startReplicaWith starts a replica whose Coordinator tells onLost (when set) of the buckets it lost.
func startReplicaWith(t *testing.T, ns, pod string, kube kubernetes.Interface, onLost func([]int, bool)) *replica {
	t.Helper()
	return startReplicaOpts(t, ns, pod, kube, func(o *Options) { o.OnLost = onLost })
}

// startReplicaOpts starts a replica whose Options set changes (callbacks) before it starts.
func startReplicaOpts(t *testing.T, ns, pod string, kube kubernetes.Interface, set func(*Options)) *replica {
	t.Helper()
	if kube == nil {
		kube = testKube
	}
	o := Options{Kube: kube, Namespace: ns, Pod: pod, Identity: pod + "_" + fmt.Sprint(time.Now().UnixNano()), Buckets: testBuckets,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry}
	set(&o)
	c := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{Coordinator: c, cancel: cancel, done: make(chan struct{})}
	go func() { r.err = c.Start(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
		}
	})
	return r
}

// eventually polls cond every 50 ms until it holds or d passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled reports whether the replicas hold every bucket, each exactly once, each by its
// rendezvous owner among them.
func settled(rs ...*replica) bool {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.Identity()
	}
	slices.Sort(ids)
	for b := range testBuckets {
		want := owner(ids, b)
		for _, r := range rs {
			if slices.Contains(r.Held(), b) != (r.Identity() == want) {
				return false
			}
		}
	}
	return true
}

// keyIn returns a key whose bucket the rendezvous hash gives to want among ids.
func keyIn(t *testing.T, ids []string, want string) string {
	t.Helper()
	slices.Sort(ids)
	for i := range 10000 {
		k := fmt.Sprintf("resource-%d", i)
		if owner(ids, bucketOf(k, testBuckets)) == want {
			return k
		}
	}
	t.Fatal("no key found")
	return ""
}

func TestEveryReplicaHoldsItsShare(t *testing.T) {
	ns := newNamespace(t)
	rs := []*replica{startReplica(t, ns, "a", nil), startReplica(t, ns, "b", nil), startReplica(t, ns, "c", nil)}
	// Each replica's lister may show the others' member Leases a period late (a replica that
	// started first counts only itself until then; its takes of their buckets fail, the Leases
	// exist): the steady state is both, every share held and every replica seeing three members.
	eventually(t, 20*time.Second, "three replicas see each other and hold their rendezvous shares", func() bool {
		for _, r := range rs {
			if r.Status().Members != 3 {
				return false
			}
		}
		return settled(rs...)
	})
	for _, r := range rs {
		if n := len(r.Held()); n == 0 || n == testBuckets {
			t.Errorf("%s holds %d of %d buckets", r.Identity(), n, testBuckets)
		}
	}
	// The Leases say the same: every bucket Lease names the one replica that holds it.
	leases, err := testKube.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelShard + "=" + roleBucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != testBuckets {
		t.Fatalf("%d bucket Leases, want %d", len(leases.Items), testBuckets)
	}
	for _, l := range leases.Items {
		var bucket int
		if _, err := fmt.Sscanf(l.Name, "conductor-tf-bucket-%d", &bucket); err != nil {
			t.Fatal(err)
		}
		holders := 0
		for _, r := range rs {
			if slices.Contains(r.Held(), bucket) {
				holders++
				if holder(&l) != r.Identity() {
					t.Errorf("%s: the Lease names %q, held by %s", l.Name, holder(&l), r.Identity())
				}
			}
		}
		if holders != 1 {
			t.Errorf("%s held by %d replicas", l.Name, holders)
		}
	}
}

// A joining replica gets its share only once the reconciles the old owner admitted are done: the
// old owner admits no new one meanwhile, and goes on serving the state of the bucket's runs.
func TestJoinWaitsForReconcilesUnderWay(t *testing.T) {
	ns := newNamespace(t)
	a := startReplica(t, ns, "a", nil)
	eventually(t, 10*time.Second, "one replica holds every bucket", func() bool { return len(a.Held()) == testBuckets })
	b := startReplica(t, ns, "b", nil)
	key := keyIn(t, []string{a.Identity(), b.Identity()}, b.Identity())
	bucket := a.Bucket(key)
	leave, handover, _, ok := a.Enter(key)
	if !ok {
		t.Fatal("the sole replica did not admit a reconcile")
	}
	eventually(t, 20*time.Second, "every other bucket settles", func() bool {
		return len(a.Held())+len(b.Held()) == testBuckets && slices.Contains(a.Held(), bucket) && !slices.Contains(b.Held(), bucket)
	})
	time.Sleep(2 * testLease) // well past any lease: the bucket stays while the reconcile is under way
	if slices.Contains(b.Held(), bucket) || !a.Serves(key) {
		t.Fatalf("bucket %d moved under a reconcile: a serves it %v, b holds %v", bucket, a.Serves(key), b.Held())
	}
	select {
	case <-handover:
	default:
		t.Fatal("the admitted reconcile was not told of the handover")
	}
	if _, _, _, ok := a.Enter(key); ok {
		t.Fatal("the old owner admitted a new reconcile of a bucket it hands over")
	}
	if _, _, _, ok := b.Enter(key); ok {
		t.Fatal("the new owner admitted a reconcile before the bucket was handed over")
	}
	leave()
	eventually(t, 5*time.Second, "the bucket moves once the reconcile is done", func() bool { return slices.Contains(b.Held(), bucket) })
	if a.Serves(key) {
		t.Fatal("the old owner still serves the bucket the new one holds")
	}
	if done, _, _, ok := b.Enter(key); !ok {
		t.Fatal("the new owner does not admit reconciles of its bucket")
	} else {
		done()
	}
	if !settled(a, b) {
		t.Fatalf("not the rendezvous shares: a %v, b %v", a.Held(), b.Held())
	}
}

// A handover called off — the replica a bucket was going to leaves before it got it — gives the
// bucket's resources back to reconcile: the reconciles its holder refused while handing it over
// were dropped (their owner-to-be was to reconcile them when it took the bucket), so OnAcquired is
// told of the bucket again. Before, they were lost until the resources' next event: in the fault
// suite (stop 73's CI) a resource whose claim was deleted just then was never destroyed.
func TestCalledOffHandoverReconcilesWhatItRefused(t *testing.T) {
	ns := newNamespace(t)
	var mu sync.Mutex
	var told []int
	a := startReplicaOpts(t, ns, "a", nil, func(o *Options) {
		o.OnAcquired = func(bs []int) { mu.Lock(); told = append(told, bs...); mu.Unlock() }
	})
	eventually(t, 10*time.Second, "one replica holds every bucket", func() bool { return len(a.Held()) == testBuckets })
	b := startReplica(t, ns, "b", nil)
	key := keyIn(t, []string{a.Identity(), b.Identity()}, b.Identity())
	bucket := a.Bucket(key)
	leave, handover, _, ok := a.Enter(key) // under way: the bucket is not handed back meanwhile
	if !ok {
		t.Fatal("the sole replica did not admit a reconcile")
	}
	defer leave()
	eventually(t, 10*time.Second, "a hands the bucket over", func() bool {
		select {
		case <-handover:
			return true
		default:
			return false
		}
	})
	if _, _, _, ok := a.Enter(key); ok {
		t.Fatal("a admitted a reconcile of a bucket it hands over")
	}
	mu.Lock()
	told = nil
	mu.Unlock()
	b.stop(t) // the bucket's owner-to-be leaves before it got it
	eventually(t, 10*time.Second, "a admits reconciles of the bucket again", func() bool {
		done, _, _, ok := a.Enter(key)
		if ok {
			done()
		}
		return ok
	})
	eventually(t, 5*time.Second, "a is told to reconcile the bucket's resources", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(told, bucket)
	})
}

// A replica cut off from the API server stops serving its buckets at its renew deadline and ends
// with ErrMembershipLost; the others take its buckets only after the lease duration, by when it no
// longer serves them, and count the handover in the bucket Leases' transitions.
func TestPartitionedReplicaIsFenced(t *testing.T) {
	ns := newNamespace(t)
	cut, kube := newPartition(t)
	a := startReplica(t, ns, "a", kube)
	b := startReplica(t, ns, "b", nil)
	eventually(t, 20*time.Second, "two replicas hold their shares", func() bool { return settled(a, b) })
	aHeld := a.Held()
	key := keyIn(t, []string{a.Identity(), b.Identity()}, a.Identity())
	before, err := testKube.CoordinationV1().Leases(ns).Get(context.Background(), BucketLeaseName(a.Bucket(key)), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	cut.Cut()
	eventually(t, testRenew+time.Second, "the cut-off replica stops serving", func() bool { return !a.Serves(key) })
	stopped := time.Since(cutAt)
	if slices.ContainsFunc(aHeld, func(x int) bool { return slices.Contains(b.Held(), x) }) {
		t.Fatalf("b took a's buckets %s after the cut, before a stopped serving", stopped)
	}
	select {
	case <-a.done:
		if !errors.Is(a.err, ErrMembershipLost) {
			t.Fatalf("a ended with %v, want ErrMembershipLost", a.err)
		}
	case <-time.After(testRenew + 2*time.Second):
		t.Fatal("a did not end")
	}
	eventually(t, testLease+5*time.Second, "b takes a's buckets", func() bool { return len(b.Held()) == testBuckets })
	a.mu.Lock()
	lastRenewal := a.renewed // the start of a's last successful renewal: a served until RenewDeadline after it
	a.mu.Unlock()
	if took := b.Since(key).Sub(lastRenewal); took < testLease {
		t.Fatalf("b took a's bucket %s after a's last renewal, before the lease duration %s", took, testLease)
	}
	l, err := testKube.CoordinationV1().Leases(ns).Get(context.Background(), BucketLeaseName(b.Bucket(key)), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != b.Identity() || transitions(l) != transitions(before)+1 {
		t.Fatalf("bucket Lease after the takeover: holder %q transitions %d, want %q and %d", holder(l), transitions(l), b.Identity(), transitions(before)+1)
	}
	t.Logf("a stopped serving %s after the cut; b took its %d buckets after %s", stopped.Round(time.Millisecond), len(aHeld), time.Since(cutAt).Round(time.Millisecond))
	// The dead replica's member Lease is collected once it has been dead for 4 lease durations.
	eventually(t, 4*testLease+5*time.Second, "a's member Lease deleted", func() bool {
		_, err := testKube.CoordinationV1().Leases(ns).Get(context.Background(), MemberLeaseName("a"), metav1.GetOptions{})
		return err != nil
	})
}

// A replica stopped gracefully hands its buckets back and deletes its member Lease: the others
// take them at once, not after the lease duration.
func TestGracefulStopHandsBackAtOnce(t *testing.T) {
	ns := newNamespace(t)
	a, b := startReplica(t, ns, "a", nil), startReplica(t, ns, "b", nil)
	eventually(t, 20*time.Second, "two replicas hold their shares", func() bool { return settled(a, b) })
	stopAt := time.Now()
	a.stop(t)
	eventually(t, testLease, "b takes every bucket before a's lease could run out", func() bool { return len(b.Held()) == testBuckets })
	if _, err := testKube.CoordinationV1().Leases(ns).Get(context.Background(), MemberLeaseName("a"), metav1.GetOptions{}); err == nil {
		t.Fatal("a's member Lease is still there")
	}
	t.Logf("b held every bucket %s after a was told to stop", time.Since(stopAt).Round(time.Millisecond))
}

// Bucket Leases deleted under their holders (by hand, or a cleanup): each holder drops what it no
// longer has a fence for and takes it again under a new Lease, every bucket held once, and a
// graceful stop still ends. Before, a holder kept a deleted bucket and its graceful stop retried
// handing it back forever (a manager pod stayed Terminating, and leading, for its whole grace
// period on kind).
func TestDeletedBucketLeasesAreDroppedAndTakenAgain(t *testing.T) {
	ns := newNamespace(t)
	a, b := startReplica(t, ns, "a", nil), startReplica(t, ns, "b", nil)
	eventually(t, 20*time.Second, "two replicas hold their shares", func() bool { return settled(a, b) })
	leases := testKube.CoordinationV1().Leases(ns)
	old, err := leases.List(context.Background(), metav1.ListOptions{LabelSelector: LabelShard + "=" + roleBucket})
	if err != nil || len(old.Items) != testBuckets {
		t.Fatalf("bucket Leases: %d, %v", len(old.Items), err)
	}
	uids := map[string]bool{}
	for _, l := range old.Items {
		uids[string(l.UID)] = true
	}
	if err := leases.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: LabelShard + "=" + roleBucket}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "every bucket held again under a new Lease, by one replica", func() bool {
		now, err := leases.List(context.Background(), metav1.ListOptions{LabelSelector: LabelShard + "=" + roleBucket})
		if err != nil || len(now.Items) != testBuckets {
			return false
		}
		for _, l := range now.Items {
			if uids[string(l.UID)] {
				return false
			}
		}
		return settled(a, b)
	})
	a.stop(t)
	eventually(t, testLease, "b takes every bucket", func() bool { return len(b.Held()) == testBuckets })
}

// Rendezvous hashing moves only the joining member's share, and shares are even.
func TestOwnerMovesOnlyTheNewShare(t *testing.T) {
	three := []string{"m1", "m2", "m3"}
	four := []string{"m1", "m2", "m3", "m4"}
	counts := map[string]int{}
	for b := range DefaultBuckets {
		before, after := owner(three, b), owner(four, b)
		if before != after && after != "m4" {
			t.Errorf("bucket %d moved from %s to %s when m4 joined", b, before, after)
		}
		counts[after]++
	}
	for _, m := range four {
		if n := counts[m]; n < DefaultBuckets/4/2 || n > DefaultBuckets/4*2 {
			t.Errorf("%s owns %d of %d buckets", m, n, DefaultBuckets)
		}
	}
	if owner(nil, 0) != "" {
		t.Error("a bucket has an owner with no members")
	}
}
