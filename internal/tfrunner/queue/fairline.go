package queue

// FairLine is a line of waiting items served across tenants in turn: one item of each tenant with
// items waiting, then the next tenant's, round robin, first come first served within a tenant (the
// fair sharing Kubernetes' API Priority and Fairness applies to requests, one queue per flow). It
// is not safe for concurrent use: its owner holds a lock. The zero value is an empty line.
type FairLine[T comparable] struct {
	items map[string][]T
	// ring is the order tenants with waiting items are served in; next the index of the tenant
	// served next.
	ring []string
	next int
}

// Push adds item at the end of tenant's line, or at its head with front (an item given back).
func (l *FairLine[T]) Push(tenant string, item T, front bool) {
	if l.items == nil {
		l.items = map[string][]T{}
	}
	if len(l.items[tenant]) == 0 {
		l.ring = append(l.ring, tenant)
	}
	if front {
		l.items[tenant] = append([]T{item}, l.items[tenant]...)
	} else {
		l.items[tenant] = append(l.items[tenant], item)
	}
}

// Pop removes and returns the item served next; false when none waits.
func (l *FairLine[T]) Pop() (T, bool) {
	var zero T
	if len(l.ring) == 0 {
		return zero, false
	}
	if l.next >= len(l.ring) {
		l.next = 0
	}
	tenant := l.ring[l.next]
	q := l.items[tenant]
	item := q[0]
	if len(q) == 1 {
		delete(l.items, tenant)
		l.ring = append(l.ring[:l.next], l.ring[l.next+1:]...)
	} else {
		l.items[tenant] = q[1:]
		l.next++
	}
	return item, true
}

// Remove takes item out of tenant's line; false when it is not there (served already).
func (l *FairLine[T]) Remove(tenant string, item T) bool {
	q := l.items[tenant]
	i := -1
	for k, x := range q {
		if x == item {
			i = k
			break
		}
	}
	if i < 0 {
		return false
	}
	q = append(q[:i:i], q[i+1:]...)
	if len(q) > 0 {
		l.items[tenant] = q
		return true
	}
	delete(l.items, tenant)
	for k, t := range l.ring {
		if t == tenant {
			l.ring = append(l.ring[:k], l.ring[k+1:]...)
			if k < l.next {
				l.next--
			}
			break
		}
	}
	return true
}

// Len is the number of items waiting.
func (l *FairLine[T]) Len() int {
	n := 0
	for _, q := range l.items {
		n += len(q)
	}
	return n
}

// Position is item's place in line (1 = served next) if nothing else arrives: the round robin
// played forward over the ring, item being the k-th of its tenant; 0 when it is not waiting.
func (l *FairLine[T]) Position(tenant string, item T) int {
	k := -1
	for i, x := range l.items[tenant] {
		if x == item {
			k = i
			break
		}
	}
	if k < 0 {
		return 0
	}
	pos := 0
	for round := 0; round <= k; round++ {
		for j := range l.ring {
			t := l.ring[(l.next+j)%len(l.ring)]
			if len(l.items[t]) > round {
				pos++
				if t == tenant && round == k {
					return pos
				}
			}
		}
	}
	return pos
}
