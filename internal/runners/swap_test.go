package runners

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
)

// The state proxy of a runner sends an adopted run's requests with the credentials the adopting
// manager issued, to that manager's state server; other runs' requests keep their own.
func TestTheStateProxySendsAnAdoptedRunsNewCredentials(t *testing.T) {
	seen := make(chan [3]string, 1)
	server := func(name string) *httptest.Server {
		return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, _ := r.BasicAuth()
			seen <- [3]string{name, u, p}
		}))
	}
	old, next := server("old"), server("next")
	defer old.Close()
	defer next.Close()
	tlsConfig := old.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConfig.RootCAs.AddCert(next.Certificate())
	r := &Runner{StateURL: old.URL, TLS: tlsConfig}
	proxy, stop, err := r.startStateProxy()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(user string) [3]string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, proxy+"/state/x", nil)
		req.SetBasicAuth(user, "own-password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return <-seen
	}
	if got := get("run-old"); got != [3]string{"old", "run-old", "own-password"} {
		t.Fatalf("before the adoption: %v", got)
	}
	if err := r.swapTo("run-old", &runnerpb.Credentials{Username: "run-new", Password: "issued", StateUrl: next.URL}); err != nil {
		t.Fatal(err)
	}
	if got := get("run-old"); got != [3]string{"next", "run-new", "issued"} {
		t.Fatalf("the adopted run's request went with %v; want the issued credentials", got)
	}
	if got := get("run-other"); got != [3]string{"next", "run-other", "own-password"} {
		t.Fatalf("another run's request went with %v; want its own", got)
	}
	r.forgetSwap("run-old")
	if got := get("run-old"); got != [3]string{"next", "run-old", "own-password"} {
		t.Fatalf("after the run: %v", got)
	}
	if err := r.swapTo("", &runnerpb.Credentials{Username: "u"}); err == nil {
		t.Fatal("credentials for a run without its own were taken")
	}
}
