package shard

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// slowWrites is a client whose Lease writes a test can hold back: every write of a bucket Lease
// (bucket true) or of the member Lease (member true) waits d, or until its request is cancelled.
type slowWrites struct {
	bucket, member atomic.Bool
	d              time.Duration
}

func (s *slowWrites) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(testCfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/leases") {
				member := strings.Contains(req.URL.Path, "conductor-tf-member-")
				if (member && s.member.Load()) || (!member && s.bucket.Load()) {
					select {
					case <-time.After(s.d):
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			return rt.RoundTrip(req)
		})
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// lostLog records what OnLost was told.
type lostLog struct {
	mu         sync.Mutex
	buckets    []int
	membership bool
	at         time.Time
}

func (l *lostLog) onLost(buckets []int, membership bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buckets, l.membership, l.at = append(l.buckets, buckets...), l.membership || membership, time.Now()
}

// Bucket writes that time out one after another (an API server saturated on writes) make a
// period last many renew deadlines. Before, the member Lease was renewed at the start of each
// period only, so such a period lapsed the membership without an error: a peer judged the replica
// dead and took the bucket of a reconcile it had admitted while that reconcile went on. Now the
// renewal has a goroutine of its own: the replica stays live, and the bucket stays with the
// reconcile.
func TestSlowBucketWritesDoNotLapseTheMembership(t *testing.T) {
	ns := newNamespace(t)
	slow := &slowWrites{d: time.Minute} // every bucket write times out (RenewDeadline/2)
	a := startReplicaWith(t, ns, "a", slow.client(t), nil)
	eventually(t, 10*time.Second, "a holds every bucket", func() bool { return len(a.Held()) == testBuckets })
	slow.bucket.Store(true)
	b := startReplica(t, ns, "b", nil)
	key := keyIn(t, []string{a.Identity(), b.Identity()}, b.Identity())
	bucket := a.Bucket(key)
	leave, _, lost, ok := a.Enter(key)
	if !ok {
		t.Fatal("a did not admit a reconcile of its bucket")
	}
	for end := time.Now().Add(4 * testLease); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if slices.Contains(b.Held(), bucket) {
			t.Fatalf("b took bucket %d while a's admitted reconcile was under way (a lapsed: %v)", bucket, a.Lapsed())
		}
		select {
		case <-a.done:
			t.Fatalf("a ended with %v while only its bucket writes were slow", a.err)
		case <-lost:
			t.Fatal("the admitted reconcile was told its bucket was lost")
		default:
		}
	}
	slow.bucket.Store(false)
	ids := []string{a.Identity(), b.Identity()}
	slices.Sort(ids)
	eventually(t, 40*time.Second, "b's share but the bucket under way moves to b", func() bool {
		for x := range testBuckets {
			want := owner(ids, x)
			if x == bucket {
				want = a.Identity()
			}
			if slices.Contains(a.Held(), x) != (want == a.Identity()) || slices.Contains(b.Held(), x) != (want == b.Identity()) {
				return false
			}
		}
		return true
	})
	leave()
	eventually(t, 10*time.Second, "the shares settle", func() bool { return settled(a, b) })
}

// A renewal that hangs lapses the membership at its renew deadline, by the watchdog's timer: every
// bucket is dropped, OnLost is told before the admitted reconciles' lost channels close, and Start
// ends with ErrMembershipLost, all within RenewDeadline + KillLatency of the last renewal's start.
func TestHungRenewalLapsesAtTheRenewDeadline(t *testing.T) {
	ns := newNamespace(t)
	slow := &slowWrites{d: time.Hour}
	var log lostLog
	a := startReplicaWith(t, ns, "a", slow.client(t), log.onLost)
	eventually(t, 10*time.Second, "a holds every bucket", func() bool { return len(a.Held()) == testBuckets })
	key := keyIn(t, []string{a.Identity()}, a.Identity())
	leave, handover, lost, ok := a.Enter(key)
	if !ok {
		t.Fatal("a did not admit a reconcile")
	}
	defer leave()
	slow.member.Store(true)
	select {
	case <-lost:
	case <-time.After(testRenew + KillLatency + testRetry):
		t.Fatal("the admitted reconcile was not told its bucket was lost")
	}
	a.mu.Lock()
	last := a.renewed
	a.mu.Unlock()
	log.mu.Lock()
	told, membership, at := slices.Clone(log.buckets), log.membership, log.at
	log.mu.Unlock()
	if !membership || len(told) != testBuckets || !slices.Contains(told, a.Bucket(key)) {
		t.Fatalf("OnLost told %v (membership %v), want all %d buckets with the membership", told, membership, testBuckets)
	}
	if after := at.Sub(last); after < testRenew || after > testRenew+KillLatency {
		t.Fatalf("OnLost told %s after the last renewal began, want within [%s, %s]", after, testRenew, testRenew+KillLatency)
	}
	select {
	case <-handover:
	default:
		t.Fatal("the lost bucket's handover channel is still open")
	}
	if a.Serves(key) || len(a.Held()) != 0 {
		t.Fatalf("a still serves %v after its lapse", a.Held())
	}
	select {
	case <-a.done:
		if !errors.Is(a.err, ErrMembershipLost) {
			t.Fatalf("a ended with %v, want ErrMembershipLost", a.err)
		}
	case <-time.After(2 * testRetry):
		t.Fatal("Start did not end at the lapse")
	}
}

// A replica stopping gracefully marks its member Lease leaving: the others take each bucket it
// hands back at once, while its last reconcile goes on. Before, the others still counted it the
// owner of what it released until that reconcile ended and its member Lease was deleted: a
// rolling update during one long apply left a third of the buckets without an owner.
func TestLeavingReplicaHandsBackAtOnce(t *testing.T) {
	ns := newNamespace(t)
	a, b := startReplica(t, ns, "a", nil), startReplica(t, ns, "b", nil)
	eventually(t, 20*time.Second, "two replicas hold their shares", func() bool { return settled(a, b) })
	key := keyIn(t, []string{a.Identity(), b.Identity()}, a.Identity())
	leave, _, _, ok := a.Enter(key)
	if !ok {
		t.Fatal("a did not admit a reconcile")
	}
	a.cancel()
	eventually(t, testLease, "b holds every bucket but the one under way", func() bool {
		return len(b.Held()) == testBuckets-1 && !slices.Contains(b.Held(), a.Bucket(key))
	})
	l, err := testKube.CoordinationV1().Leases(ns).Get(context.Background(), MemberLeaseName("a"), metav1.GetOptions{})
	if err != nil || l.Annotations[AnnotationLeaving] != "true" {
		t.Fatalf("a's member Lease while it stops: %v, %v", l.GetAnnotations(), err)
	}
	leave()
	eventually(t, testLease, "b takes the last bucket", func() bool { return len(b.Held()) == testBuckets })
	select {
	case <-a.done:
	case <-time.After(5 * time.Second):
		t.Fatal("a did not stop")
	}
}

// Options.Validate refuses durations under which a replica could be taken over before it stopped.
func TestValidateDurations(t *testing.T) {
	for _, c := range []struct {
		o  Options
		ok bool
	}{
		{Options{}, true},
		{Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, true},
		{Options{LeaseDuration: 11 * time.Second, RenewDeadline: 10 * time.Second}, false},
		{Options{LeaseDuration: 15 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}, false},
	} {
		if err := c.o.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v", c.o, err)
		}
	}
	if f := (Options{}).Fence(); f != 15*time.Second+KillLatency {
		t.Errorf("Fence() = %s", f)
	}
}
