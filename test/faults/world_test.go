//go:build faults

package faults_test

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// world is the infrastructure the suite's runs create: an object per resource key, which exists
// once a create of it completed and until a destroy. It is the ledger of every create the carriers
// carry (begun, completed, killed), adoption and destroy, and it records the breaches of the
// invariant the suite exists for: never two writers. A create begun while another create of the
// same key is under way (two replicas applying one state at once), or while the object exists (a
// create again without a destroy between: the object made twice), is a violation.
type world struct {
	start time.Time

	mu         sync.Mutex
	exists     map[string]bool
	open       map[string]string // key → replica whose create is under way
	lines      []string
	violations []string
	creates    int
	killed     int
	adopted    int
	// unrecorded counts the creates sigkill-after-create aimed at (armed) and those it hit: the
	// object landed and the replica died before the record (landed).
	armed, landed int
}

// landedUnrecorded records that replica's create of key landed and the replica died before its
// record was written (sigkill-after-create hit its moment).
func (w *world) landedUnrecorded(key, replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.landed++
	w.logLocked(key, replica, "replica killed before the create's record")
}

func newWorld() *world {
	return &world{start: time.Now(), exists: map[string]bool{}, open: map[string]string{}}
}

func (w *world) logLocked(key, replica, what string) {
	w.lines = append(w.lines, fmt.Sprintf("+%.3fs %-14s %-10s %s", time.Since(w.start).Seconds(), key, replica, what))
}

// begin records a create of key by replica; it reports a violation when another is under way or
// the object exists.
func (w *world) begin(key, replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.creates++
	w.logLocked(key, replica, "create begins")
	if other, ok := w.open[key]; ok {
		w.violations = append(w.violations, fmt.Sprintf("%s: two writers: %s began a create while %s's was under way", key, replica, other))
	}
	if w.exists[key] {
		w.violations = append(w.violations, fmt.Sprintf("%s: created twice: %s began a create of an object that exists (no destroy between)", key, replica))
	}
	w.open[key] = replica
}

// end records the end of replica's create of key: completed (the object exists) or killed.
func (w *world) end(key, replica string, completed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[key] == replica {
		delete(w.open, key)
	}
	if completed {
		w.exists[key] = true
		w.logLocked(key, replica, "create completes")
		return
	}
	w.killed++
	w.logLocked(key, replica, "create killed")
}

// has reports whether key's object exists.
func (w *world) has(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exists[key]
}

// adopt records a run that found key's object existing (a create in doubt, approved after looking)
// and took it into its state instead of creating it again.
func (w *world) adopt(key, replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.adopted++
	w.logLocked(key, replica, "existing object adopted")
}

// destroy records key's object destroyed.
func (w *world) destroy(key, replica string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.exists, key)
	w.logLocked(key, replica, "destroyed")
}

// logRun records a run's end that is not a create's (a failure, a hold).
func (w *world) logRun(key, replica, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logLocked(key, replica, what)
}

// note records something that happened to the fleet (a fault, a replica's start or end).
func (w *world) note(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logLocked("-", "-", what)
}

// violated returns the violations so far, and the ledger lines of their keys and of the faults.
func (w *world) violated() (violations, lines []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := map[string]bool{}
	for _, v := range w.violations {
		keys[strings.SplitN(v, ":", 2)[0]] = true
	}
	for _, l := range w.lines {
		f := strings.Fields(l)
		if len(f) > 1 && (len(keys) == 0 || keys[f[1]] || f[1] == "-") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 150 {
		lines = lines[len(lines)-150:]
	}
	return append([]string(nil), w.violations...), lines
}
