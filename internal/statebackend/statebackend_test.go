package statebackend

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSuffixFor(t *testing.T) {
	cases := []struct {
		reason, name, want string
	}{
		{"a plain name is kept", "db-7f3k2", "db-7f3k2"},
		{"a name ending in -digits is hashed", "pet-1", "pet-1--h" + hash16("pet-1")},
		{"dots become dashes and a hash keeps names apart", "a.b", "a-b--h" + hash16("a.b")},
		{"a name with -- is hashed", "a--b", "a-b--h" + hash16("a--b")},
		{"long names are cut and hashed", strings.Repeat("x", 100), strings.Repeat("x", 40) + "--h" + hash16(strings.Repeat("x", 100))},
		{"a name of nothing but symbols still has a prefix", "...", "state--h" + hash16("...")},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := SuffixFor(tc.name)
			if got != tc.want {
				t.Errorf("SuffixFor(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
	// The defect of issue 17: "x-1" became "x-1-s", which is also the suffix of "x-1-s".
	for _, pair := range [][2]string{{"x-1", "x-1-s"}, {"a.b", "a-b"}, {"pet-1", "pet-1--h" + hash16("pet-1")}} {
		if SuffixFor(pair[0]) == SuffixFor(pair[1]) {
			t.Errorf("%q and %q share the suffix %q", pair[0], pair[1], SuffixFor(pair[0]))
		}
	}
	for _, name := range []string{"a", "a-1", "a.b-2", "x-123", strings.Repeat("y-", 80) + "9", "db.prod.eu-1", "Up/Per"} {
		checkSuffix(t, name)
	}
}

// checkSuffix asserts what every suffix must be: a valid label value that gives a valid Secret
// and Lease name and never ends in -digits.
func checkSuffix(t *testing.T, name string) {
	t.Helper()
	s := SuffixFor(name)
	if errs := validation.IsValidLabelValue(s); len(errs) > 0 || s == "" {
		t.Errorf("SuffixFor(%q) = %q: not a label value: %v", name, s, errs)
	}
	if errs := validation.IsDNS1123Subdomain(LeaseName(DefaultWorkspace, s)); len(errs) > 0 {
		t.Errorf("Lease name for %q invalid: %v", name, errs)
	}
	if regexp.MustCompile(`-[0-9]+$`).MatchString(s) {
		t.Errorf("SuffixFor(%q) = %q ends in -digits", name, s)
	}
}

// FuzzSuffixFor looks for two names with one state: run with
// go test ./internal/statebackend -run '^$' -fuzz FuzzSuffixFor. The pair is also bent toward the
// shapes that collided before (a name, the name with "-s", with "--h" and a hash).
func FuzzSuffixFor(f *testing.F) {
	for _, seed := range [][2]string{{"x-1", "x-1-s"}, {"a.b", "a-b"}, {"db-7f3k2", "DB-7f3k2"}, {"pet-1", "pet-1--h" + hash16("pet-1")},
		{strings.Repeat("x", 100), strings.Repeat("x", 101)}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkSuffix(t, a)
		for _, other := range []string{b, a + "-s", SuffixFor(a), SuffixFor(b), strings.TrimSuffix(a, "-s")} {
			if other != a && SuffixFor(a) == SuffixFor(other) {
				t.Fatalf("%q and %q share the state suffix %q", a, other, SuffixFor(a))
			}
		}
	})
}

// hash16 is the first 16 hex characters of the name's SHA-256, computed here independently.
func hash16(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

func TestDecode(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(`{"version":4,"serial":7,"lineage":"abc","resources":[{},{}]}`))
	_ = zw.Close()
	st, err := Decode(map[string][]byte{"tfstate": buf.Bytes()})
	if err != nil || st.Serial != 7 || st.Lineage != "abc" || st.Resources != 2 {
		t.Fatalf("Decode = %+v, %v", st, err)
	}
	if _, err := Decode(map[string][]byte{}); err == nil {
		t.Error("missing key accepted")
	}
	if _, err := Decode(map[string][]byte{"tfstate": []byte("plain")}); err == nil {
		t.Error("non-gzip data accepted")
	}
}

func TestIsOwnStaleLock(t *testing.T) {
	start := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	self := "conductor@conductor-tf"
	dead := &RunRecord{Who: self, Started: start}
	ended := &RunRecord{Who: self, Started: start, Ended: start.Add(2 * time.Minute)}
	alive := &RunRecord{Who: self, Started: start, Alive: true}
	cases := []struct {
		reason string
		lock   *Lock
		run    *RunRecord
		self   string
		want   bool
	}{
		{"our deployment's holder, taken during a run recorded Running that is not alive (the pod died)",
			&Lock{ID: "1", Who: self, Created: start.Add(time.Second)}, dead, self, true},
		{"a run that ended (its process was killed) left the lock while it ran",
			&Lock{ID: "1", Who: self, Created: start.Add(time.Minute)}, ended, self, true},
		{"a lock taken long after our run ended is not that run's",
			&Lock{ID: "1", Who: self, Created: start.Add(time.Hour)}, ended, self, false},
		{"a live run's lock is never taken", &Lock{ID: "1", Who: self, Created: start.Add(time.Second)}, alive, self, false},
		{"someone else's lock is never ours", &Lock{ID: "1", Who: "ops@laptop", Created: start.Add(time.Second)}, dead, self, false},
		{"a run recorded by another controller is not ours to recover",
			&Lock{ID: "1", Who: "conductor@other", Created: start.Add(time.Second)}, &RunRecord{Who: "conductor@other", Started: start}, self, false},
		{"our holder but taken long before the run", &Lock{ID: "1", Who: self, Created: start.Add(-time.Hour)}, dead, self, false},
		{"no recorded run", &Lock{ID: "1", Who: self, Created: start}, nil, self, false},
		{"a run recorded without holder", &Lock{ID: "1", Who: "", Created: start}, &RunRecord{Started: start}, "", false},
		{"no lock", nil, dead, self, false},
	}
	for _, tc := range cases {
		if got := IsOwnStaleLock(tc.lock, tc.run, tc.self); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
		}
	}
}
