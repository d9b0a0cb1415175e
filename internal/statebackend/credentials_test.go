package statebackend

import (
	"regexp"
	"testing"
)

// TestNewLockIDIsUUIDv4: lock IDs have the form of Terraform's (a random UUID, version 4, RFC 4122
// variant) and differ from one another.
func TestNewLockIDIsUUIDv4(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := newLockID()
		if !v4.MatchString(id) {
			t.Fatalf("lock ID %q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("lock ID %q made twice", id)
		}
		seen[id] = true
	}
}
