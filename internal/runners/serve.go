package runners

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// ServeOptions configure the manager's side of runner pools.
type ServeOptions struct {
	// Kube keeps the CA (Secret and ConfigMap CAName in Namespace) and reviews runners' tokens.
	Kube      kubernetes.Interface
	Namespace string
	// Hosts are the names and addresses runners reach the manager by, for its certificate.
	Hosts []string
	// Address is the run protocol's listen address; StateAddress that of the state server for
	// runners, which serves State (the manager's statebackend.Server) over TLS.
	Address, StateAddress string
	State                 http.Handler
	// Authorize, HeartbeatTimeout, FenceGrace and OnRunnerLost are the Dispatcher's (the Authenticator is a
	// TokenReviewer of Kube).
	Authorize        func(ctx context.Context, pool, user string) error
	HeartbeatTimeout time.Duration
	FenceGrace       time.Duration
	OnRunnerLost     func(pool, runner, key string, err error)
	// Leading and Leader are the Dispatcher's: whether this replica leads, and where the leader
	// is when it does not.
	Leading func() bool
	Leader  func() string
	// CheckPool, StateURL, Drain and QueueTimeout are the Dispatcher's (see DispatcherOptions).
	CheckPool    func(ctx context.Context, pool string) error
	StateURL     string
	Drain        *queue.Drain
	QueueTimeout time.Duration
	// Adopt is the Dispatcher's: it vouches for runs a predecessor started that runners resume
	// here (see adopt.go).
	Adopt       func(ctx context.Context, r AdoptRequest) (*Adoption, error)
	KeepErrored func(ctx context.Context, runID string, state []byte) error
}

// Serve starts both servers with a certificate from the CA (LoadOrCreateCA) and returns the
// Dispatcher and the state server's listen address. Both stop when ctx is done.
func Serve(ctx context.Context, o ServeOptions) (*Dispatcher, string, error) {
	ca, err := LoadOrCreateCA(ctx, o.Kube, o.Namespace)
	if err != nil {
		return nil, "", err
	}
	tlsConfig, err := ca.ServerConfig(o.Hosts)
	if err != nil {
		return nil, "", err
	}
	d := NewDispatcher(DispatcherOptions{
		Authenticator: &TokenReviewer{Kube: o.Kube}, Authorize: o.Authorize,
		HeartbeatTimeout: o.HeartbeatTimeout, FenceGrace: o.FenceGrace, OnRunnerLost: o.OnRunnerLost, Leading: o.Leading, Leader: o.Leader,
		CheckPool: o.CheckPool, StateURL: o.StateURL, Drain: o.Drain, QueueTimeout: o.QueueTimeout,
		Adopt: o.Adopt, KeepErrored: o.KeepErrored,
	})
	if err := d.Serve(ctx, o.Address, tlsConfig); err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", o.StateAddress)
	if err != nil {
		return nil, "", fmt.Errorf("state server for runners: %w", err)
	}
	srv := &http.Server{Handler: o.State, TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return d, ln.Addr().String(), nil
}

// PoolAuthorizer allows a user to serve a pool when the InfraRunnerPool exists and the user is its
// ServiceAccount (PoolServiceAccount) in namespace, the manager's.
func PoolAuthorizer(c client.Reader, namespace string) func(ctx context.Context, pool, user string) error {
	return func(ctx context.Context, pool, user string) error {
		var p v1alpha1.InfraRunnerPool
		if err := c.Get(ctx, types.NamespacedName{Name: pool}, &p); err != nil {
			return fmt.Errorf("InfraRunnerPool %s: %w", pool, err)
		}
		sa := PoolServiceAccount(&p)
		if want := ServiceAccountUser(namespace, sa); user != want {
			return errors.New("the pool's runners are " + want)
		}
		// One ServiceAccount per pool: runners of a pool sharing its account with another could
		// take the other pool's runs.
		others, err := PoolsSharing(ctx, c, &p)
		if err != nil {
			return err
		}
		if len(others) > 0 {
			return fmt.Errorf("ServiceAccount %s also serves pool(s) %s: each pool needs an account of its own", sa, strings.Join(others, ", "))
		}
		return nil
	}
}

// PoolsSharing returns the names of the other pools whose runners use p's ServiceAccount, sorted,
// or the error of listing the pools.
func PoolsSharing(ctx context.Context, c client.Reader, p *v1alpha1.InfraRunnerPool) ([]string, error) {
	var pools v1alpha1.InfraRunnerPoolList
	if err := c.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing runner pools: %w", err)
	}
	var out []string
	for i := range pools.Items {
		o := &pools.Items[i]
		if o.Name != p.Name && PoolServiceAccount(o) == PoolServiceAccount(p) {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PoolChecker refuses runs for a pool that does not exist (an *PoolNotFoundError).
func PoolChecker(c client.Reader) func(ctx context.Context, pool string) error {
	return func(ctx context.Context, pool string) error {
		err := c.Get(ctx, types.NamespacedName{Name: pool}, &v1alpha1.InfraRunnerPool{})
		if apierrors.IsNotFound(err) {
			return &PoolNotFoundError{Pool: pool}
		}
		return err
	}
}

// PoolNotFoundError is a run for a runner pool that does not exist.
type PoolNotFoundError struct{ Pool string }

func (e *PoolNotFoundError) Error() string {
	return fmt.Sprintf("runner pool %s: no InfraRunnerPool of that name", e.Pool)
}

// PoolServiceAccount is the ServiceAccount of a pool's runners: spec.serviceAccountName, or
// conductor-tf-runner-<pool>, which the pool's reconciler creates. Each pool has an identity of
// its own, so a token of one pool's runners serves no other pool.
func PoolServiceAccount(p *v1alpha1.InfraRunnerPool) string {
	if p.Spec.ServiceAccountName != "" {
		return p.Spec.ServiceAccountName
	}
	return "conductor-tf-runner-" + p.Name
}
