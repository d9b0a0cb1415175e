package secrets

import (
	"context"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/runners"
)

// DefaultTokenExpiration is how long a run's ServiceAccount token is valid when kubernetesAccess
// names no expirationSeconds: 3600 seconds.
const DefaultTokenExpiration int64 = 3600

// RunCluster is the API server that runs granted Kubernetes access talk to: its address and the
// CA that signs its serving certificate, as the controller's own rest.Config has them. Runs never
// get the controller's credentials, only a token of the ServiceAccount their class names.
type RunCluster struct {
	// Host is the API server's URL (https://host:port).
	Host string
	// CAData is the PEM bundle that verifies the API server; empty with Insecure.
	CAData []byte
	// Insecure skips verifying the API server, as the controller's own config does.
	Insecure bool
}

// RunClusterFor reads the API server's address and CA out of the controller's rest.Config (CAData,
// or the file CAFile names, as in-cluster config gives it). It returns an error when CAFile cannot
// be read.
func RunClusterFor(cfg *rest.Config) (RunCluster, error) {
	c := RunCluster{Host: cfg.Host, CAData: cfg.CAData, Insecure: cfg.Insecure}
	if len(c.CAData) == 0 && cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return c, fmt.Errorf("reading the API server's CA: %w", err)
		}
		c.CAData = data
	}
	return c, nil
}

// reservedAccount says whose the ServiceAccount name (in the controller's namespace) is when it is
// one a run must never get a token of: the controller's own (ControllerServiceAccount), or a runner
// pool's (its spec.serviceAccountName, or conductor-tf-runner-<pool>), which serves the run
// protocol. It returns "" for any other account, and the error of listing the pools.
func (r *Keeper) reservedAccount(ctx context.Context, name string) (string, error) {
	if name == r.controllerAccount {
		return "the controller's own", nil
	}
	var pools v1alpha1.InfraRunnerPoolList
	if err := r.api.List(ctx, &pools); err != nil {
		return "", fmt.Errorf("listing runner pools: %w", err)
	}
	for i := range pools.Items {
		if runners.PoolServiceAccount(&pools.Items[i]) == name {
			return "runner pool " + pools.Items[i].Name + "'s", nil
		}
	}
	return "", nil
}

// kubernetesAccess returns the kubeconfig a run of res is granted, or nil when the resource grants
// none (spec.kubernetesAccess absent): a token of the named ServiceAccount for the API server's
// default audience (requestToken), valid for expirationSeconds (DefaultTokenExpiration when
// unset), in a kubeconfig for RunCluster. Errors as requestToken's.
func (r *Keeper) kubernetesAccess(ctx context.Context, res *v1alpha1.InfraResource) ([]byte, error) {
	access := res.Spec.KubernetesAccess
	if access == nil {
		return nil, nil
	}
	token, err := r.requestToken(ctx, "kubernetesAccess", access.ServiceAccountName, "", access.ExpirationSeconds)
	if err != nil {
		return nil, err
	}
	return runKubeconfig(r.runCluster, token)
}

// requestToken requests now, from the TokenRequest API, a token of the ServiceAccount name in the
// controller's namespace for audience ("" is the API server's default), valid for expiration
// seconds (DefaultTokenExpiration when nil); the token itself is never stored on any object. field
// names the spec field in messages. It returns an *provision.InputError ServiceAccountNotFound when the
// account does not exist or the API server refuses the request, ServiceAccountForbidden when it
// is the controller's or a runner pool's (reservedAccount), and the API error otherwise.
func (r *Keeper) requestToken(ctx context.Context, field, name, audience string, expiration *int64) (string, error) {
	seconds := DefaultTokenExpiration
	if expiration != nil {
		seconds = *expiration
	}
	ns := r.namespace
	if whose, err := r.reservedAccount(ctx, name); err != nil {
		return "", err
	} else if whose != "" {
		return "", &provision.InputError{Reason: v1alpha1.ReasonServiceAccountForbidden, Message: fmt.Sprintf(
			"%s: ServiceAccount %s/%s is %s: a run may not have its credentials", field, ns, name, whose)}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := r.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", &provision.InputError{Reason: v1alpha1.ReasonServiceAccountNotFound, Message: fmt.Sprintf(
			"%s: ServiceAccount %s/%s not found", field, ns, name)}
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return "", &provision.InputError{Reason: v1alpha1.ReasonServiceAccountNotFound, Message: fmt.Sprintf(
			"%s: no token for ServiceAccount %s/%s: %v", field, ns, name, err)}
	case err != nil:
		return "", err
	}
	return tr.Status.Token, nil
}

// runKubeconfig is a kubeconfig with one cluster, one user (the bearer token) and one context,
// encoded by client-go's clientcmd.
func runKubeconfig(c RunCluster, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["run"] = &clientcmdapi.Cluster{
		Server: c.Host, CertificateAuthorityData: c.CAData, InsecureSkipTLSVerify: c.Insecure,
	}
	cfg.AuthInfos["run"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["run"] = &clientcmdapi.Context{Cluster: "run", AuthInfo: "run"}
	cfg.CurrentContext = "run"
	return clientcmd.Write(*cfg)
}
