package statebackend

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// OpenTofu's state and plan encryption (opentofu/opentofu v1.12.6, internal/encryption): an
// encrypted document is JSON {"serial", "lineage" (states only, copied in plain), "meta": {alias:
// base64 key provider metadata}, "encrypted_data": base64, "encryption_version": "v0"}. With the
// pbkdf2 key provider the metadata is JSON {"salt": base64, "iterations", "hash_function":
// "sha256"|"sha512", "key_length"} and the key is PBKDF2(passphrase, salt, iterations, hash,
// key_length); the aes_gcm method's data is a 12-byte nonce followed by the AES-GCM sealed
// plaintext, with no additional data. A Keyring reads and writes that format with the
// passphrases the runs get, so that what the controller reads of a state (outputs, resources,
// the content behind a serial) and what it writes (a restored version) is OpenTofu's own format.
const (
	// EnvEncryption is the variable through which OpenTofu takes an encryption configuration
	// (HCL or JSON), merged over the module's own `terraform { encryption {} }` block.
	EnvEncryption = "TF_ENCRYPTION"
	// encryptionVersion is the format version OpenTofu writes and reads ("v0").
	encryptionVersion = "v0"
	// KeyIterations and KeyHash are the PBKDF2 settings the runs and the controller use: OpenTofu's
	// minimum count (its default is 600,000 with SHA-512). The iterations stretch a passphrase a
	// person chose; the passphrases here are 256 random bits (NewPassphrase), which no iteration
	// count makes stronger, and every tofu command derives its keys again (several times: each
	// target and each key provider), so the cheapest settings OpenTofu accepts: SHA-256, which
	// CPUs with SHA extensions compute about 5× faster than SHA-512 (61 ms against 288 ms for
	// 200,000 iterations on this project's CI machine).
	KeyIterations = 200000
	KeyHash       = "sha256"
	// keyLength and saltLength are OpenTofu's pbkdf2 defaults (bytes): an AES-256 key.
	keyLength  = 32
	saltLength = 32
	// MinPassphraseLength is OpenTofu's pbkdf2 minimum (characters).
	MinPassphraseLength = 16
	// keyCacheSize bounds the derived keys a Keyring keeps (one per salt: one per tofu process
	// that wrote a state).
	keyCacheSize = 4096
)

// ErrNoStateKey is returned when a state or plan is encrypted and no configured passphrase opens
// it (the key was rotated away, or the install has no key at all).
var ErrNoStateKey = errors.New("the state is encrypted with a key this controller does not have")

// Keyring holds the passphrases of state and plan encryption: the current one, with which runs
// encrypt, and a previous one they and the controller still decrypt with, so that a rotation
// re-encrypts each state at its next write (OpenTofu's `fallback`). It is safe for concurrent use.
type Keyring struct {
	keys []passphrase // current first
	// state is the state whose keyring this is (ForState), "" for the install's keyring.
	state string
	// runConfig is RunConfig's result, made once.
	runConfig func() string
	// derived holds keys derived for a metadata alias and salt, shared by the install's keyring
	// and the keyrings of its states.
	derived *keyCache
}

// keyCache holds derived keys by metadata alias and salt (at most keyCacheSize).
type keyCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

// passphrase is one passphrase and the alias of its metadata in encrypted documents.
type passphrase struct {
	secret string
	alias  string
}

// NewKeyring returns the keyring of the current passphrase and, when not empty, the previous one.
// It returns an error when a passphrase is shorter than MinPassphraseLength (OpenTofu refuses those)
// or the two are equal.
func NewKeyring(current, previous string) (*Keyring, error) {
	k := &Keyring{derived: &keyCache{m: map[string][]byte{}}}
	for i, p := range []string{current, previous} {
		if p == "" && i == 1 {
			break
		}
		if len(p) < MinPassphraseLength {
			return nil, fmt.Errorf("a state encryption passphrase must have at least %d characters", MinPassphraseLength)
		}
		k.keys = append(k.keys, passphrase{secret: p, alias: keyAlias(p)})
	}
	if len(k.keys) == 2 && k.keys[0].alias == k.keys[1].alias {
		return nil, errors.New("the previous state encryption passphrase is the current one")
	}
	k.runConfig = sync.OnceValue(k.writeRunConfig)
	return k, nil
}

// NewPassphrase returns a random passphrase: 32 random bytes, hex (64 characters).
func NewPassphrase() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// keyAlias names a passphrase in the metadata of what it encrypted ("conductor-" and 12 hex digits
// of its SHA-256): OpenTofu's encrypted_metadata_alias, so that the controller knows which
// passphrase opens a document without trying each, and the name survives renaming the providers.
func keyAlias(p string) string {
	sum := sha256.Sum256([]byte("conductor-tf state key " + p))
	return "conductor-" + hex.EncodeToString(sum[:6])
}

// KeyID is the alias of the current passphrase, as documents it encrypted name it (meta).
func (k *Keyring) KeyID() string { return k.keys[0].alias }

// RunConfig returns the TF_ENCRYPTION configuration (HCL, written with hclwrite, once) of the
// keyring's passphrases: a pbkdf2 key provider and an aes_gcm method for each, and state and plan
// targets that encrypt with the first and fall back to the others. The targets are enforced: no
// unencrypted method (OpenTofu's migration path, which warns on every command) is offered; a state
// not under the run's key is served re-sealed instead (the server's GET), so it is under it at its
// next write. A run gets the configuration of its state's keyring (ForState): that state's keys
// only. It holds the passphrases: pass it to a run's process only.
func (k *Keyring) RunConfig() string { return k.runConfig() }

func (k *Keyring) writeRunConfig() string {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	names := make([]string, len(k.keys))
	for i, p := range k.keys {
		names[i] = "conductor"
		if i > 0 {
			names[i] = fmt.Sprintf("conductor_previous%d", i)
		}
		kp := body.AppendNewBlock("key_provider", []string{"pbkdf2", names[i]}).Body()
		kp.SetAttributeValue("passphrase", cty.StringVal(p.secret))
		kp.SetAttributeValue("iterations", cty.NumberIntVal(KeyIterations))
		kp.SetAttributeValue("key_length", cty.NumberIntVal(keyLength))
		kp.SetAttributeValue("salt_length", cty.NumberIntVal(saltLength))
		kp.SetAttributeValue("hash_function", cty.StringVal(KeyHash))
		kp.SetAttributeValue("encrypted_metadata_alias", cty.StringVal(p.alias))
		m := body.AppendNewBlock("method", []string{"aes_gcm", names[i]}).Body()
		m.SetAttributeTraversal("keys", traversal("key_provider", "pbkdf2", names[i]))
	}
	for _, target := range []string{"state", "plan"} {
		t := body.AppendNewBlock(target, nil).Body()
		t.SetAttributeTraversal("method", traversal("method", "aes_gcm", names[0]))
		t.SetAttributeValue("enforced", cty.True)
		for _, n := range names[1:] {
			t = t.AppendNewBlock("fallback", nil).Body()
			t.SetAttributeTraversal("method", traversal("method", "aes_gcm", n))
		}
	}
	return string(f.Bytes())
}

// traversal is the reference root.a.b.
func traversal(root string, attrs ...string) hcl.Traversal {
	t := hcl.Traversal{hcl.TraverseRoot{Name: root}}
	for _, a := range attrs {
		t = append(t, hcl.TraverseAttr{Name: a})
	}
	return t
}

// encrypted is an encrypted document (see the file's comment).
type encrypted struct {
	Serial  *int64            `json:"serial,omitempty"`
	Lineage string            `json:"lineage,omitempty"`
	Meta    map[string][]byte `json:"meta"`
	Data    []byte            `json:"encrypted_data"`
	Version string            `json:"encryption_version"`
}

// pbkdf2Meta is the pbkdf2 key provider's metadata.
type pbkdf2Meta struct {
	Salt         []byte `json:"salt"`
	Iterations   int    `json:"iterations"`
	HashFunction string `json:"hash_function"`
	KeyLength    int    `json:"key_length"`
}

// IsEncrypted reports whether doc is an encrypted document (it has "encryption_version", as
// OpenTofu's IsEncryptionPayload decides).
func IsEncrypted(doc []byte) bool {
	var probe struct {
		Version string `json:"encryption_version"`
	}
	return json.Unmarshal(doc, &probe) == nil && probe.Version != ""
}

// Open returns the plaintext of doc: doc itself when it is not encrypted, else the decrypted
// document. The install's keyring opens what its passphrases sealed and what any state's key
// sealed (it derives that key from the alias, statekeys.go); a state's keyring opens only what its
// own key sealed. It returns an error wrapping ErrNoStateKey when no passphrase of k (nil: none)
// opens it, and an error for a malformed document or another format version.
func (k *Keyring) Open(doc []byte) ([]byte, error) {
	if !IsEncrypted(doc) {
		return doc, nil
	}
	var e encrypted
	if err := json.Unmarshal(doc, &e); err != nil {
		return nil, fmt.Errorf("reading an encrypted document: %w", err)
	}
	if e.Version != encryptionVersion {
		return nil, fmt.Errorf("encrypted document of format %q, not %q", e.Version, encryptionVersion)
	}
	if k == nil {
		return nil, fmt.Errorf("%w (no state encryption key is configured)", ErrNoStateKey)
	}
	for _, alias := range slices.Sorted(maps.Keys(e.Meta)) {
		p, ok := k.passphraseOf(alias)
		if !ok {
			continue
		}
		key, err := k.derive(p, e.Meta[alias])
		if err != nil {
			return nil, err
		}
		return openAESGCM(key, e.Data)
	}
	return nil, fmt.Errorf("%w (encrypted with %s; this controller has %s)", ErrNoStateKey,
		strings.Join(slices.Sorted(maps.Keys(e.Meta)), ", "), strings.Join(k.aliases(), ", "))
}

// Seal encrypts a plain state with the current passphrase, as a run of OpenTofu would write it
// (a new random salt and nonce; serial and lineage copied in plain). It returns an error when
// state is not JSON.
func (k *Keyring) Seal(state []byte) ([]byte, error) {
	var pass struct {
		Serial  *int64 `json:"serial"`
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(state, &pass); err != nil {
		return nil, fmt.Errorf("encrypting a state: %w", err)
	}
	return k.seal(pass.Serial, pass.Lineage, state)
}

// SealDocument encrypts any document (a plan's rendering, a log) with the current passphrase in
// the format of Seal, with no serial or lineage: Open reads it. Errors: only a failed derivation.
func (k *Keyring) SealDocument(doc []byte) ([]byte, error) { return k.seal(nil, "", doc) }

// seal encrypts plain with the current passphrase under a new salt and nonce.
func (k *Keyring) seal(serial *int64, lineage string, plain []byte) ([]byte, error) {
	meta := pbkdf2Meta{Salt: make([]byte, saltLength), Iterations: KeyIterations, HashFunction: KeyHash, KeyLength: keyLength}
	_, _ = rand.Read(meta.Salt)
	raw, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	key, err := k.derive(k.keys[0], raw)
	if err != nil {
		return nil, err
	}
	data, err := sealAESGCM(key, plain)
	if err != nil {
		return nil, err
	}
	return json.Marshal(encrypted{Serial: serial, Lineage: lineage,
		Meta: map[string][]byte{k.keys[0].alias: raw}, Data: data, Version: encryptionVersion})
}

// derive returns the key of passphrase p for the pbkdf2 metadata raw, derived once per salt.
func (k *Keyring) derive(p passphrase, raw []byte) ([]byte, error) {
	var m pbkdf2Meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("reading the key metadata of %s: %w", p.alias, err)
	}
	var h func() hash.Hash
	switch m.HashFunction {
	case "sha512":
		h = sha512.New
	case "sha256":
		h = sha256.New
	default:
		return nil, fmt.Errorf("key metadata of %s: hash function %q is not sha256 or sha512", p.alias, m.HashFunction)
	}
	// Only the settings this controller's runs write (writeRunConfig; SHA-512 before 824928e): a
	// document a run wrote with `iterations: 1e15` must not pin a reconcile worker and a core.
	if len(m.Salt) != saltLength || m.Iterations != KeyIterations || m.KeyLength != keyLength {
		return nil, fmt.Errorf("key metadata of %s: salt %d bytes, %d iterations, key %d bytes: not the settings this controller writes (%d, %d, %d)",
			p.alias, len(m.Salt), m.Iterations, m.KeyLength, saltLength, KeyIterations, keyLength)
	}
	id := p.alias + "\x00" + string(raw)
	c := k.derived
	c.mu.Lock()
	key, ok := c.m[id]
	c.mu.Unlock()
	if ok {
		return key, nil
	}
	key, err := pbkdf2.Key(h, p.secret, m.Salt, m.Iterations, m.KeyLength)
	if err != nil {
		return nil, fmt.Errorf("deriving the key of %s: %w", p.alias, err)
	}
	c.mu.Lock()
	if len(c.m) >= keyCacheSize {
		clear(c.m)
	}
	c.m[id] = key
	c.mu.Unlock()
	return key, nil
}

func (k *Keyring) aliases() []string {
	out := make([]string, len(k.keys))
	for i, p := range k.keys {
		out[i] = p.alias
	}
	return out
}

// openAESGCM opens data, a 12-byte nonce followed by the sealed plaintext (aes_gcm's layout).
func openAESGCM(key, data []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(data) < gcm.NonceSize() {
		return nil, errors.New("decrypting a document: its data is shorter than a nonce")
	}
	plain, err := gcm.Open(nil, data[:gcm.NonceSize()], data[gcm.NonceSize():], nil)
	if err != nil {
		return nil, fmt.Errorf("decrypting a document: %w", err)
	}
	return plain, nil
}

// sealAESGCM seals plain with a random nonce, returned in front (aes_gcm's layout).
func sealAESGCM(key, plain []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	return gcm.Seal(nonce, nonce, plain, nil), nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("AES key: %w", err)
	}
	return cipher.NewGCM(block)
}
