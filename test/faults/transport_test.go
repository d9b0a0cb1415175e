//go:build faults

package faults_test

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// faultTransport is the API server as one replica sees it, through a proxy the suite controls (a
// round tripper every client of the replica goes through): writes delayed, member-Lease renewals
// held back, the state's Secret writes failing, or everything cut.
type faultTransport struct {
	// writeLatency: every write (not GET) waits a uniform draw from [100 ms, 500 ms).
	writeLatency atomic.Bool
	// memberHang: writes of the member Lease wait until their request is cancelled.
	memberHang atomic.Bool
	// secretsFail: writes of Secrets fail (the state server's state, pending and history writes).
	secretsFail atomic.Bool
	// cut: every request fails at once, as for a replica whose process is gone.
	cut atomic.Bool

	mu  sync.Mutex
	rnd *rand.Rand
}

var errCut = errors.New("fault: cut off from the API server")

func newFaultTransport(seed uint64) *faultTransport {
	return &faultTransport{rnd: rand.New(rand.NewPCG(seed, 11))}
}

func (f *faultTransport) latency() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return 100*time.Millisecond + time.Duration(f.rnd.Int64N(int64(400*time.Millisecond)))
}

// wrap is rest.Config.WrapTransport.
func (f *faultTransport) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if f.cut.Load() {
			return nil, errCut
		}
		if req.Method != http.MethodGet {
			path := req.URL.Path
			switch {
			case f.memberHang.Load() && strings.Contains(path, "/leases/conductor-tf-member-"):
				<-req.Context().Done()
				return nil, req.Context().Err()
			case f.secretsFail.Load() && strings.Contains(path, "/secrets"):
				return nil, errors.New("fault: Secret writes fail")
			}
			if f.writeLatency.Load() {
				select {
				case <-time.After(f.latency()):
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
