package statebackend

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

const plainState = `{"version":4,"terraform_version":"1.12.6","serial":7,"lineage":"l-1","outputs":{"password":{"value":"hunter2-secret","type":"string","sensitive":true}},"resources":[{"mode":"managed","type":"random_password","name":"p","instances":[]}]}`

// sealedPlain is a keyring of one passphrase and plainState sealed with it.
func sealedPlain(t *testing.T) (*Keyring, []byte) {
	t.Helper()
	keys, err := NewKeyring("0123456789abcdef-current", "")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := keys.Seal([]byte(plainState))
	if err != nil {
		t.Fatal(err)
	}
	return keys, sealed
}

func TestKeyringSealOpen(t *testing.T) {
	keys, sealed := sealedPlain(t)
	if bytes.Contains(sealed, []byte("hunter2-secret")) || bytes.Contains(sealed, []byte("random_password")) {
		t.Fatalf("sealed state holds plaintext: %s", sealed)
	}
	if !IsEncrypted(sealed) || IsEncrypted([]byte(plainState)) {
		t.Fatal("IsEncrypted does not tell the two apart")
	}
	// serial and lineage stay readable, as OpenTofu copies them: the server's checks need them.
	st, err := decodeJSON(sealed)
	if err != nil || st.Serial != 7 || st.Lineage != "l-1" {
		t.Fatalf("serial and lineage of the sealed state: %+v, %v", st, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(sealed, &doc); err != nil {
		t.Fatal(err)
	}
	if string(doc["encryption_version"]) != `"v0"` || !strings.Contains(string(doc["meta"]), keys.KeyID()) {
		t.Fatalf("not OpenTofu's v0 layout under this key's alias: %s", sealed)
	}
	plain, err := keys.Open(sealed)
	if err != nil || string(plain) != plainState {
		t.Fatalf("Open(Seal(s)) = %s, %v", plain, err)
	}
	if plain, err := keys.Open([]byte(plainState)); err != nil || string(plain) != plainState {
		t.Fatalf("a plain state opens as itself: %s, %v", plain, err)
	}
	// Two seals differ (salt, nonce) and hold the same state.
	again, _ := keys.Seal([]byte(plainState))
	if bytes.Equal(again, sealed) || !sameState(keys, again, sealed) || sameState(nil, again, sealed) {
		t.Fatal("sameState does not compare encrypted states by their plaintext")
	}
}

func TestKeyringRotationAndRefusals(t *testing.T) {
	old, _ := NewKeyring("0123456789abcdef-old", "")
	rotated, err := NewKeyring("0123456789abcdef-new", "0123456789abcdef-old")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewKeyring("0123456789abcdef-other", "")
	sealedOld, _ := old.Seal([]byte(plainState))
	if plain, err := rotated.Open(sealedOld); err != nil || string(plain) != plainState {
		t.Fatalf("the previous passphrase opens what it sealed: %v", err)
	}
	sealedNew, _ := rotated.Seal([]byte(plainState))
	if !strings.Contains(string(sealedNew), rotated.KeyID()) || strings.Contains(string(sealedNew), old.KeyID()) {
		t.Fatal("a rotated keyring seals with its current passphrase only")
	}
	if _, err := old.Open(sealedNew); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("the old keyring opens the new key's state: %v", err)
	}
	if _, err := other.Open(sealedOld); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("another passphrase: %v", err)
	}
	var none *Keyring
	if _, err := none.Open(sealedOld); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("no keyring: %v", err)
	}
	// A tampered ciphertext is refused by AES-GCM.
	var e encrypted
	_ = json.Unmarshal(sealedOld, &e)
	e.Data[len(e.Data)-1] ^= 1
	tampered, _ := json.Marshal(e)
	if _, err := old.Open(tampered); err == nil || errors.Is(err, ErrNoStateKey) {
		t.Fatalf("a tampered state: %v", err)
	}
	for _, bad := range [][2]string{{"short", ""}, {"0123456789abcdef", "short"}, {"0123456789abcdef", "0123456789abcdef"}} {
		if _, err := NewKeyring(bad[0], bad[1]); err == nil {
			t.Errorf("NewKeyring(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// TestRunConfig: the TF_ENCRYPTION configuration parses as HCL, holds the passphrase only as a
// quoted string (hclwrite escapes it), and names the targets OpenTofu reads.
func TestRunConfig(t *testing.T) {
	keys, _ := NewKeyring(`0123456789abcdef"}${x}`, "0123456789abcdef-old")
	cfg := keys.RunConfig()
	f, diags := hclsyntax.ParseConfig([]byte(cfg), EnvEncryption, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", diags, cfg)
	}
	body := f.Body.(*hclsyntax.Body)
	var kinds []string
	for _, b := range body.Blocks {
		kinds = append(kinds, strings.Join(append([]string{b.Type}, b.Labels...), "."))
		if b.Type == "key_provider" && b.Labels[1] == "conductor" {
			v, d := b.Body.Attributes["passphrase"].Expr.Value(nil)
			if d.HasErrors() || v.AsString() != `0123456789abcdef"}${x}` {
				t.Errorf("passphrase reads back as %#v, %s", v, d)
			}
		}
	}
	want := "key_provider.pbkdf2.conductor method.aes_gcm.conductor key_provider.pbkdf2.conductor_previous1 method.aes_gcm.conductor_previous1 state plan"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("blocks %s, want %s", got, want)
	}
	if !strings.Contains(cfg, "enforced") || strings.Contains(cfg, "unencrypted") || !strings.Contains(cfg, "fallback") || !strings.Contains(cfg, keys.KeyID()) {
		t.Errorf("config:\n%s", cfg)
	}
}

// Issue 65 item 3: the key parameters are read from the document a run writes; only the ones this
// controller writes are accepted. Before, a state whose metadata said `iterations: 10^15` was
// derived as asked, pinning a reconcile worker and a core for good.
func TestKeyringRefusesKeyParametersItDoesNotWrite(t *testing.T) {
	keys, sealed := sealedPlain(t)
	var e encrypted
	if err := json.Unmarshal(sealed, &e); err != nil {
		t.Fatal(err)
	}
	var m pbkdf2Meta
	if err := json.Unmarshal(e.Meta[keys.KeyID()], &m); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(pbkdf2Meta) pbkdf2Meta{
		"iterations 1e15": func(m pbkdf2Meta) pbkdf2Meta { m.Iterations = 1_000_000_000_000_000; return m },
		"key length 64":   func(m pbkdf2Meta) pbkdf2Meta { m.KeyLength = 64; return m },
		"a 1-byte salt":   func(m pbkdf2Meta) pbkdf2Meta { m.Salt = m.Salt[:1]; return m },
	} {
		raw, _ := json.Marshal(bad(m))
		e.Meta[keys.KeyID()] = raw
		doc, _ := json.Marshal(e)
		done := make(chan error, 1)
		go func() { _, err := keys.Open(doc); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not the settings this controller writes") {
				t.Errorf("%s: %v, want a refusal", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Open still deriving after 30 s", name)
		}
	}
}
