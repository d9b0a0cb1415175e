package statebackend

import (
	"errors"
	"strings"
	"testing"
)

// TestStateKeysOpenOnlyTheirState: a run's configuration holds its state's key and nothing of the
// install's passphrase or another state's key; what one state's key sealed, another's does not
// open, and the install's keyring (the controller) opens all; a state under the install's own
// passphrase (before keys per state) or adopted from another identity is served re-sealed under
// the run's key. On the old code every run got the install's passphrase: one RunConfig for all.
func TestStateKeysOpenOnlyTheirState(t *testing.T) {
	const install, previous = "0123456789abcdef-current", "0123456789abcdef-previous"
	keys, err := NewKeyring(install, previous)
	if err != nil {
		t.Fatal(err)
	}
	a, b := keys.ForState(StateID(DefaultWorkspace, "a")), keys.ForState(StateID(DefaultWorkspace, "b"))
	for _, cfg := range []string{a.RunConfig(), b.RunConfig()} {
		if strings.Contains(cfg, install) || strings.Contains(cfg, previous) {
			t.Fatalf("a run's configuration holds an install passphrase:\n%s", cfg)
		}
	}
	if a.RunConfig() == b.RunConfig() || a.keys[0].secret == b.keys[0].secret || strings.Contains(a.RunConfig(), b.keys[0].secret) {
		t.Fatal("two states' runs get the same key")
	}
	sealedA, err := a.Seal([]byte(plainState))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(sealedA); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("state b's key opens state a's document: %v", err)
	}
	if plain, err := keys.Open(sealedA); err != nil || string(plain) != plainState {
		t.Fatalf("the install's keyring opens a state's document: %s, %v", plain, err)
	}
	if plain, err := a.Open(sealedA); err != nil || string(plain) != plainState {
		t.Fatalf("a state's key opens its own document: %s, %v", plain, err)
	}
	// The same derivation every time (a restarted controller reads what the last one's runs wrote).
	again, _ := NewKeyring(install, previous)
	if again.ForState(StateID(DefaultWorkspace, "a")).RunConfig() != a.RunConfig() {
		t.Fatal("a state's key is not derived the same way again")
	}
	// Rotation: under the new passphrase, a's document (sealed under the old one) is opened by
	// a's run (a plan saved before the rotation) and not by b's, and served to a's run under the
	// new key.
	rotated, _ := NewKeyring("0123456789abcdef-rotated", install)
	ra := rotated.ForState(StateID(DefaultWorkspace, "a"))
	if plain, err := ra.Open(sealedA); err != nil || string(plain) != plainState {
		t.Fatalf("the rotated state keyring does not open the state's document of before: %v", err)
	}
	if _, err := rotated.ForState(StateID(DefaultWorkspace, "b")).Open(sealedA); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("b's rotated keyring opens a's document: %v", err)
	}
	for name, doc := range map[string][]byte{
		"under the old state key":            sealedA,
		"under the install's own passphrase": must(rotated.Seal([]byte(plainState))),
		"adopted from state b":               must(rotated.ForState(StateID(DefaultWorkspace, "b")).Seal([]byte(plainState))),
		"plain":                              []byte(plainState),
	} {
		served := rotated.ServeSealed(StateID(DefaultWorkspace, "a"), doc)
		if !ra.SealedWithCurrent(served) {
			t.Errorf("%s: not served under the run's key", name)
		}
		if plain, err := ra.Open(served); err != nil || string(plain) != plainState {
			t.Errorf("%s: the run's key opens what is served: %s, %v", name, plain, err)
		}
	}
	current := must(ra.Seal([]byte(plainState)))
	if served := rotated.ServeSealed(StateID(DefaultWorkspace, "a"), current); string(served) != string(current) {
		t.Error("a document already under the run's key is sealed again")
	}
	// A state key's alias on a state's keyring derives nothing (a run's keyring opens its own only).
	if _, ok := a.passphraseOf(b.keys[0].alias); ok {
		t.Error("a state's keyring derives another state's key from an alias")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
