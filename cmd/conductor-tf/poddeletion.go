package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podCheckPeriod is how often a manager in a pod reads its own Pod for a deletion that came
// without a SIGTERM (stopOnPodDeletion's every).
const podCheckPeriod = 10 * time.Second

// stopOnPodDeletion returns a context that ends with stop (the signal handler's) or once this
// manager's own Pod (namespace/name, as the Deployment's POD_NAMESPACE and POD_NAME give them) is
// being deleted (a deletionTimestamp) or gone after it was seen: the manager then stops as on
// SIGTERM (drains, hands its buckets back, releases the leader Lease).
//
// A SIGTERM is not always acted on: in the e2e sharding spec (CI, twice) a replica whose pod was
// deleted as its container started (a scale-down right after a replica was replaced) went on
// serving as a live member, holding its share of the buckets with nothing reconciled in them, for
// the rest of terminationGracePeriodSeconds (750 s). The first read is made before this returns
// (bounded by 5 s), so that a manager started in a pod already being deleted never serves; then one
// read each period every (podCheckPeriod, 10 s: a get of one Pod, which the manager's Role
// allows). A Pod not found at the first read (the manager outside a cluster, or a name that is no
// pod) is not watched; read errors are retried next period.
func stopOnPodDeletion(stop context.Context, kube kubernetes.Interface, namespace, name string, every time.Duration, log logr.Logger) context.Context {
	if name == "" {
		return stop
	}
	w := &podWatch{kube: kube, namespace: namespace, name: name, log: log.WithValues("pod", namespace+"/"+name)}
	ctx, cancel := context.WithCancel(stop)
	if w.deleted(ctx) {
		cancel()
		return ctx
	}
	if !w.seen {
		w.log.V(1).Info("this manager's pod not found: its deletion is known by SIGTERM only")
		cancel()
		return stop
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if w.deleted(ctx) {
					cancel()
					return
				}
			}
		}
	}()
	return ctx
}

// podWatch reads one Pod for stopOnPodDeletion; seen records that it was found once.
type podWatch struct {
	kube            kubernetes.Interface
	namespace, name string
	log             logr.Logger
	seen            bool
}

// deleted reads the Pod and reports whether it is being deleted, or gone after it was seen.
func (w *podWatch) deleted(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := w.kube.CoreV1().Pods(w.namespace).Get(rctx, w.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && w.seen:
		w.log.Info("this manager's pod is gone and no SIGTERM came: stopping as on SIGTERM")
		return true
	case err != nil:
		return false
	}
	w.seen = true
	if p.DeletionTimestamp != nil {
		w.log.Info("this manager's pod is being deleted and no SIGTERM came: stopping as on SIGTERM", "deletedAt", p.DeletionTimestamp.Time)
		return true
	}
	return false
}
