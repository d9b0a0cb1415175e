package statebackend

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// secretModule keeps a generated password in state and an output, as modules/aws-rds does.
const secretModule = `terraform {
  backend "http" {}
}
variable "n" {
  type    = number
  default = 1
}
resource "random_password" "p" {
  length  = 24
  special = false
}
resource "terraform_data" "d" {
  input = var.n
}
output "password" {
  value     = random_password.p.result
  sensitive = true
}
`

// TestEncryptedStateWithTofu drives real tofu through the server: a plain state migrates to an
// encrypted one at its next write; the state Secrets and a saved plan then hold no plaintext; the
// store reads serial, resources and outputs through the key; a rotation (new passphrase, the old
// as previous) re-encrypts at the next apply; a version restored by the controller is read back by
// tofu with the key (OpenTofu's format, nothing of ours); and a keyring without the key is refused.
func TestEncryptedStateWithTofu(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	srv := startServer(t, testKube, ns, DefaultHistoryLimit)
	var keys atomic.Pointer[Keyring]
	srv.Store().SetKeys(keys.Load)
	tofu := os.Getenv("CONDUCTOR_TF_TOFU")
	const suffix = "enc"
	h := srv.Store().For(suffix)
	dir := writeModule(t, secretModule)
	run := func(args ...string) string {
		t.Helper()
		creds, revoke := srv.IssueRun(suffix, map[string]string{LabelResource: suffix})
		defer revoke()
		return mustTF(t, tofu, dir, creds.EnvList(), args...)
	}
	stored := func() string {
		t.Helper()
		raw, found, err := readStateJSON(ctx, testKube, ns, DefaultWorkspace, suffix)
		if err != nil || !found {
			t.Fatalf("stored state: %v, %v", found, err)
		}
		return string(raw)
	}
	password := func() string {
		t.Helper()
		var outs map[string]struct{ Value string }
		if err := json.Unmarshal([]byte(run("output", "-json")), &outs); err != nil || outs["password"].Value == "" {
			t.Fatalf("output -json: %v", err)
		}
		return outs["password"].Value
	}

	// Plain first (no keyring), as an install before encryption.
	run("init", "-input=false")
	run("apply", "-auto-approve", "-input=false")
	secret := password()
	if !strings.Contains(stored(), secret) {
		t.Fatal("the plain state does not hold the password: the spec would prove nothing")
	}

	// Migration: with a key, the next write encrypts.
	a, _ := NewKeyring("passphrase-a-0123456789", "")
	keys.Store(a)
	run("apply", "-auto-approve", "-input=false", "-var=n=2")
	if s := stored(); strings.Contains(s, secret) || strings.Contains(s, "random_password") || !IsEncrypted([]byte(s)) || !strings.Contains(s, a.KeyID()) {
		t.Fatalf("after migration the state Secret holds:\n%.400s", s)
	}
	// A key per state: the run was given its state's key, not the install's passphrase, and with
	// its configuration tofu reads its own state and not another state's (a second resource's,
	// applied through the server), through tofu's own kubernetes backend.
	creds, revoke := srv.IssueRun(suffix, nil)
	revoke()
	if strings.Contains(creds.Encryption, "passphrase-a-0123456789") {
		t.Fatal("a run's TF_ENCRYPTION holds the install passphrase")
	}
	if s := stored(); !strings.Contains(s, a.ForState(StateID(DefaultWorkspace, suffix)).KeyID()) {
		t.Fatalf("the state is not under its own key:\n%.400s", s)
	}
	odir := writeModule(t, secretModule)
	otherRun := func(args ...string) {
		oc, orevoke := srv.IssueRun("neighbour", nil)
		defer orevoke()
		mustTF(t, tofu, odir, oc.EnvList(), args...)
	}
	otherRun("init", "-input=false")
	otherRun("apply", "-auto-approve", "-input=false")
	runEnv := []string{EnvEncryption + "=" + creds.Encryption}
	own := writeModule(t, kubernetesBackend(ns, suffix, ""))
	mustTF(t, tofu, own, runEnv, "init", "-input=false")
	if list := mustTF(t, tofu, own, runEnv, "state", "list"); !strings.Contains(list, "random_password.p") {
		t.Fatalf("the run's key does not read its own state:\n%s", list)
	}
	neighbour := writeModule(t, kubernetesBackend(ns, "neighbour", ""))
	if out, err := runTF(t, tofu, neighbour, runEnv, "init", "-input=false"); err == nil || !strings.Contains(out, "decryption") {
		t.Fatalf("one run's key opened another state (init: %v):\n%s", err, out)
	}
	st, found, err := h.Status(ctx)
	if err != nil || !found || st.Resources != 2 {
		t.Fatalf("status through the key: %+v, %v, %v", st, found, err)
	}
	plain, _, err := h.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outs, err := json.Marshal(mustOutputs(t, plain)); err != nil || !strings.Contains(string(outs), secret) {
		t.Fatalf("outputs read through the key: %s, %v", outs, err)
	}
	// A saved plan is encrypted too.
	run("plan", "-input=false", "-var=n=3", "-out=tfplan")
	if planFile, err := os.ReadFile(filepath.Join(dir, "tfplan")); err != nil || !IsEncrypted(planFile) || strings.Contains(string(planFile), secret) {
		t.Fatalf("saved plan: encrypted %v, %v", IsEncrypted(planFile), err)
	}
	if out := run("show", "-json", "tfplan"); !strings.Contains(out, `"terraform_data"`) {
		t.Fatalf("the run reads its encrypted plan: %.300s", out)
	}

	// Rotation: b current, a previous; the next apply re-encrypts with b.
	b, _ := NewKeyring("passphrase-b-0123456789", "passphrase-a-0123456789")
	keys.Store(b)
	run("apply", "-auto-approve", "-input=false", "-var=n=4")
	if s := stored(); !strings.Contains(s, b.KeyID()) || strings.Contains(s, a.KeyID()) {
		t.Fatalf("after rotation the state is not under the new key alone:\n%.400s", s)
	}
	if _, _, err := h.Read(ctx); err != nil {
		t.Fatal(err)
	}
	onlyB, _ := NewKeyring("passphrase-b-0123456789", "")
	keys.Store(onlyB)
	if got := password(); got != secret {
		t.Fatalf("after rotation tofu reads password %q", got)
	}

	// Restore: the controller decrypts the kept version, sets its serial and encrypts it again;
	// tofu reads it with the key. The newest kept version (the apply of n=2) was written under a,
	// which b's keyring holds as its previous key.
	keys.Store(b)
	hist, err := h.History(ctx)
	if err != nil || len(hist) < 2 {
		t.Fatalf("history: %+v, %v", hist, err)
	}
	before, _, _ := h.Status(ctx)
	if err := h.Restore(ctx, hist[0].Serial, "restore-1"); err != nil {
		t.Fatalf("restore of serial %d: %v", hist[0].Serial, err)
	}
	after, _, _ := h.Status(ctx)
	if s := stored(); after.Serial != before.Serial+1 || !IsEncrypted([]byte(s)) || !strings.Contains(s, b.KeyID()) || strings.Contains(s, secret) {
		t.Fatalf("restored state: serial %d after %d, stored:\n%.400s", after.Serial, before.Serial, s)
	}
	keys.Store(onlyB)
	if got := password(); got != secret {
		t.Fatalf("tofu reads the restored state's password as %q", got)
	}
	if out := run("state", "list"); !strings.Contains(out, "random_password.p") {
		t.Fatalf("tofu lists the restored state:\n%s", out)
	}

	// A person with the passphrase reads the state with tofu's kubernetes backend and the
	// configuration docs/state.md gives: the state's passphrase and alias computed as its shell
	// lines compute them (HKDF-SHA256 of the install passphrase, info "conductor-tf state
	// default/<suffix>"; the alias the install's, ":default/<suffix>" after it).
	sum := sha256.Sum256([]byte("conductor-tf state key passphrase-b-0123456789"))
	statePass, err := hkdf.Key(sha256.New, []byte("passphrase-b-0123456789"), nil, "conductor-tf state default/"+suffix, 32)
	if err != nil {
		t.Fatal(err)
	}
	byHand := fmt.Sprintf(`key_provider "pbkdf2" "conductor" {
  passphrase = "%s"
  iterations = 200000
  hash_function = "sha256"
  encrypted_metadata_alias = "conductor-%s:default/%s"
}
method "aes_gcm" "conductor" { keys = key_provider.pbkdf2.conductor }
state { method = method.aes_gcm.conductor }
plan { method = method.aes_gcm.conductor }`, hex.EncodeToString(statePass), hex.EncodeToString(sum[:])[:12], suffix)
	kdir := writeModule(t, kubernetesBackend(ns, suffix, ""))
	mustTF(t, tofu, kdir, []string{EnvEncryption + "=" + byHand}, "init", "-input=false")
	if list := mustTF(t, tofu, kdir, []string{EnvEncryption + "=" + byHand}, "state", "list"); !strings.Contains(list, "random_password.p") {
		t.Fatalf("tofu's kubernetes backend with the documented configuration lists:\n%s", list)
	}

	// Without the key, the store refuses to read rather than guess.
	other, _ := NewKeyring("passphrase-c-0123456789", "")
	keys.Store(other)
	if _, _, err := h.Read(ctx); err == nil || !strings.Contains(err.Error(), b.KeyID()) {
		t.Fatalf("read with another key: %v", err)
	}
	keys.Store(nil)
	if _, _, err := h.Status(ctx); err == nil {
		t.Fatal("status of an encrypted state without keys")
	}
}

func mustOutputs(t *testing.T, state []byte) map[string]json.RawMessage {
	t.Helper()
	var doc struct {
		Outputs map[string]json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(state, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Outputs
}
