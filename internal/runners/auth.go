package runners

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Authenticator verifies a runner's bearer token and returns the user it names.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (user string, err error)
}

// TokenReviewer authenticates runners with the API server's TokenReview, for tokens of Audience
// only: a projected ServiceAccount token for the run protocol, never the pod's API token. A token
// it accepted is accepted again without a review for CacheFor.
type TokenReviewer struct {
	Kube kubernetes.Interface
	// CacheFor is how long an accepted token is remembered (0: one minute).
	CacheFor time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cachedUser
}

type cachedUser struct {
	user    string
	expires time.Time
}

// Authenticate returns the token's username (system:serviceaccount:<namespace>:<name>), or an
// error when the API server does not authenticate it for Audience.
func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (string, error) {
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	t.mu.Lock()
	if c, ok := t.cache[sum]; ok && now.Before(c.expires) {
		t.mu.Unlock()
		return c.user, nil
	}
	t.mu.Unlock()
	tr, err := t.Kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		reason := tr.Status.Error
		if reason == "" {
			reason = "not authenticated"
		}
		return "", fmt.Errorf("token refused: %s", reason)
	}
	if !slices.Contains(tr.Status.Audiences, Audience) {
		return "", fmt.Errorf("token refused: not for audience %s", Audience)
	}
	cacheFor := t.CacheFor
	if cacheFor <= 0 {
		cacheFor = time.Minute
	}
	t.mu.Lock()
	if t.cache == nil {
		t.cache = map[[32]byte]cachedUser{}
	}
	for k, c := range t.cache {
		if now.After(c.expires) {
			delete(t.cache, k)
		}
	}
	t.cache[sum] = cachedUser{user: tr.Status.User.Username, expires: now.Add(cacheFor)}
	t.mu.Unlock()
	return tr.Status.User.Username, nil
}

// ServiceAccountUser is the username of a ServiceAccount's tokens.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// authenticate checks the stream's "authorization: Bearer <token>" metadata.
func (d *Dispatcher) authenticate(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) != 1 || !strings.HasPrefix(values[0], "Bearer ") {
		return "", status.Error(codes.Unauthenticated, "no bearer token")
	}
	user, err := d.opts.Authenticator.Authenticate(ctx, strings.TrimPrefix(values[0], "Bearer "))
	if err != nil {
		return "", status.Error(codes.Unauthenticated, err.Error())
	}
	return user, nil
}

// tokenFile is a runner's credentials: the projected token file, read for every stream (the
// kubelet rotates it in place).
type tokenFile string

func (f tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("reading the run protocol token: %w", err)
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(data))}, nil
}

func (tokenFile) RequireTransportSecurity() bool { return true }

var _ credentials.PerRPCCredentials = tokenFile("")
