package readypool

import (
	"sync"
	"time"
)

// expectationTTL is how long a create or delete this reconciler made is awaited in its cache
// before it is forgotten (a watch event missed): 5 minutes, as client-go's ExpectationsTimeout for
// ReplicaSets.
const expectationTTL = 5 * time.Minute

// expectations remembers, per class, the pool members this reconciler created or deleted that
// its cache does not show yet, so that a reconcile right after its own writes neither creates the
// members again nor counts the deleted ones: ReplicaSet's ControllerExpectations
// (k8s.io/kubernetes/pkg/controller), kept by name instead of by count, since the cache's list says
// which are in. A create is awaited until the cache lists its name; a delete until the cache lists
// the name no more, or lists it being deleted. Its zero value is ready; safe for concurrent use.
type expectations struct {
	mu               sync.Mutex
	creates, deletes map[string]map[string]time.Time // class → member name → when written
}

// created records a member of class created under name.
func (e *expectations) created(class, name string) { e.record(&e.creates, class, name) }

// deleted records a member of class whose delete was accepted.
func (e *expectations) deleted(class, name string) { e.record(&e.deletes, class, name) }

func (e *expectations) record(m *map[string]map[string]time.Time, class, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if *m == nil {
		*m = map[string]map[string]time.Time{}
	}
	if (*m)[class] == nil {
		(*m)[class] = map[string]time.Time{}
	}
	(*m)[class][name] = time.Now()
}

// pending settles the class's expectations against listed (the names the cache lists with the
// class's label, each true when not being deleted) at now, and returns the creates still not
// listed and the deletes still listed as live: the first count as members provisioning, the second
// as gone. What was awaited for longer than expectationTTL is forgotten.
func (e *expectations) pending(class string, listed map[string]bool, now time.Time) (creates int, deletes map[string]bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, at := range e.creates[class] {
		if _, in := listed[name]; in || now.Sub(at) > expectationTTL {
			delete(e.creates[class], name)
			continue
		}
		creates++
	}
	deletes = map[string]bool{}
	for name, at := range e.deletes[class] {
		if !listed[name] || now.Sub(at) > expectationTTL {
			delete(e.deletes[class], name)
			continue
		}
		deletes[name] = true
	}
	return creates, deletes
}

// forget drops every expectation of class (the class is gone).
func (e *expectations) forget(class string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.creates, class)
	delete(e.deletes, class)
}
