package statebackend

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
)

// A key per state (issue 65). A run is never given the install's passphrase: it gets its state's
// own, derived from the install's current passphrase P and the state's identity id (StateID) as
//
//	hex(HKDF-SHA256(secret = P, salt = none, info = "conductor-tf state " + id, 32 bytes))
//
// (RFC 5869; 64 hex characters, used as a pbkdf2 passphrase as any other), under the metadata
// alias keyAlias(P) + ":" + id. So a run's environment (TF_ENCRYPTION) opens its own state and
// plans and nothing else: another state's document names another id, whose key HKDF does not let
// one state's key reach. The controller holds P, and so opens any state: the alias says which
// passphrase and which state (Keyring.Open derives the key from it). States written before keys
// per state (under P itself), under a rotated-away P, or adopted from another state's identity, are
// served to their runs re-sealed under their own key (the server's GET: ServeSealed), and are under
// it from their next write on.
const (
	// stateKeyInfo is HKDF's info prefix; the state's identity follows.
	stateKeyInfo = "conductor-tf state "
	// stateAliasSep separates the install passphrase's alias from the state's identity in a
	// state key's alias.
	stateAliasSep = ":"
)

// StateID is the identity a state's key is derived from: "<workspace>/<suffix>", which names its
// Secret (SecretName) and which the state keeps when its resource's spec changes.
func StateID(workspace, suffix string) string { return workspace + "/" + suffix }

// ForState returns, for k the install's keyring, the keyring of the state id (StateID), the one a
// run of that state gets: the state's keys derived from k's passphrases (see the file's comment),
// the current one's sealing and the previous one's opening too (a plan saved before a rotation),
// opening only what they sealed. It shares k's cache of derived keys. nil for a nil k.
func (k *Keyring) ForState(id string) *Keyring {
	if k == nil {
		return nil
	}
	s := &Keyring{state: id, derived: k.derived}
	for _, p := range k.keys {
		s.keys = append(s.keys, statePassphrase(p, id))
	}
	s.runConfig = sync.OnceValue(s.writeRunConfig)
	return s
}

// statePassphrase is the passphrase of state id under the install passphrase p.
func statePassphrase(p passphrase, id string) passphrase {
	// hkdf.Key fails only for a length over 255 hash sizes; 32 bytes never does.
	key, _ := hkdf.Key(sha256.New, []byte(p.secret), nil, stateKeyInfo+id, 32)
	return passphrase{secret: hex.EncodeToString(key), alias: p.alias + stateAliasSep + id}
}

// passphraseOf returns the passphrase of k that the metadata alias names: one of k's own, or, for
// the install's keyring, the key of the state the alias names under one of its passphrases.
func (k *Keyring) passphraseOf(alias string) (passphrase, bool) {
	for _, p := range k.keys {
		if p.alias == alias {
			return p, true
		}
	}
	base, id, ok := strings.Cut(alias, stateAliasSep)
	if !ok || id == "" || k.state != "" {
		return passphrase{}, false
	}
	for _, p := range k.keys {
		if p.alias == base {
			return statePassphrase(p, id), true
		}
	}
	return passphrase{}, false
}

// SealedWithCurrent reports whether doc is an encrypted document sealed with k's current
// passphrase alone (its metadata names that alias and no other).
func (k *Keyring) SealedWithCurrent(doc []byte) bool {
	if k == nil {
		return false
	}
	// One decode for both questions: the server's GET asks this of every state it serves.
	var probe struct {
		Version string                     `json:"encryption_version"`
		Meta    map[string]json.RawMessage `json:"meta"`
	}
	if json.Unmarshal(doc, &probe) != nil || probe.Version == "" || len(probe.Meta) != 1 {
		return false
	}
	_, ok := probe.Meta[k.keys[0].alias]
	return ok
}

// ServeSealed returns state (a stored document, plain or encrypted) as the run of the state id
// must get it: sealed with that state's key (ForState). A document already sealed with it is
// returned as it is; any other is opened with k (the install's keyring) and sealed again. When it
// cannot be opened (ErrNoStateKey) it is returned as it is, so that the run's own decryption says
// what is wrong. For a nil k, state itself.
func (k *Keyring) ServeSealed(id string, state []byte) []byte {
	sk := k.ForState(id)
	if sk == nil || sk.SealedWithCurrent(state) {
		return state
	}
	plain, err := k.Open(state)
	if err != nil {
		return state
	}
	sealed, err := sk.Seal(plain)
	if err != nil {
		return state
	}
	return sealed
}
