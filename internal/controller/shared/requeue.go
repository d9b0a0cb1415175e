package shared

import (
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
)

// RequeueOnConflict turns a write conflict (HTTP 409, another writer changed the object since it
// was read) into a requeue after RetryDelay without an error, so that it is neither logged nor
// backed off; any other error and result are returned as they are.
func RequeueOnConflict(result ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil && apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: RetryDelay()}, nil
	}
	return result, err
}

// RetryDelay spreads retries after a lost write race over 50–250 ms (uniform).
func RetryDelay() time.Duration { return 50*time.Millisecond + rand.N(200*time.Millisecond) }

// Jitter spreads d by up to ±10 %, so that objects created together are not checked together:
// a duration drawn uniformly from [0.9 d, 1.1 d). wait.Jitter(base, f) draws from [base,
// base·(1+f)); base 0.9 d and f 2/9 give that interval.
func Jitter(d time.Duration) time.Duration {
	return wait.Jitter(d-d/10, 2.0/9)
}

// Truncate cuts s to its first n bytes and marks the cut with "…"; s as it is when not longer.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LowestNonZeroResult is the sooner of two reconcile results, as cluster-api's
// util.LowestNonZeroResult aggregates its phases' results: a zero result (requeue only on a watch
// event) yields to the other; of two RequeueAfter durations, the shorter wins.
func LowestNonZeroResult(i, j ctrl.Result) ctrl.Result {
	switch {
	case i.IsZero():
		return j
	case j.IsZero():
		return i
	case j.RequeueAfter < i.RequeueAfter:
		return j
	}
	return i
}
