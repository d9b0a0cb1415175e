package tfrunner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// TestGrantedKubeconfigLivesOnlyDuringTheRun runs a provisioner that reports what it sees of
// Kubernetes credentials: with Spec.Kubeconfig the run sees KUBECONFIG and KUBE_CONFIG_PATH naming
// a file with exactly those bytes, which is gone from the workspace once the run ends; without it,
// the next run of the same workspace sees neither (issue 18).
func TestGrantedKubeconfigLivesOnlyDuringTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, dir := onePool(t)
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "credprobe"))
	out := filepath.Join(t.TempDir(), "seen")
	granted := []byte("apiVersion: v1\nkind: Config\n# a granted kubeconfig\n")
	spec := func(run string, kubeconfig []byte) tfrunner.Spec {
		return tfrunner.Spec{Module: tfrunner.Module{Source: src}, Kubeconfig: kubeconfig,
			Variables: map[string]any{"out": out, "run": run}}
	}

	if _, err := pool.Apply(ctx, "granted", spec("1", granted), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ := os.ReadFile(out)
	path := filepath.Join(dir, "granted", "conductor.kubeconfig")
	want := "KUBECONFIG=" + path + "\nKUBE_CONFIG_PATH=" + path + "\n" + string(granted)
	if string(seen) != want {
		t.Fatalf("the run saw\n%s\nwant\n%s", seen, want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the granted kubeconfig outlived the run: %v", err)
	}

	if _, err := pool.Apply(ctx, "granted", spec("2", nil), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ = os.ReadFile(out)
	if string(seen) != "KUBECONFIG=\nKUBE_CONFIG_PATH=\n" {
		t.Fatalf("a run granted nothing saw\n%s", seen)
	}
	if strings.Contains(string(seen), "granted") {
		t.Fatal("a later run saw an earlier run's credentials")
	}
}

// TestGrantedIdentityLivesOnlyDuringTheRun runs a provisioner that reports what it sees of a cloud
// identity: with Spec.Identity the run sees the AWS variables, AWS_WEB_IDENTITY_TOKEN_FILE naming a
// file in its workspace with exactly the token, and GOOGLE_APPLICATION_CREDENTIALS naming an
// external-account configuration whose credential_source is that file; both files are gone once
// the run ends, and the next run granted nothing sees none of it (issue 45).
func TestGrantedIdentityLivesOnlyDuringTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, dir := onePool(t)
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "identityprobe"))
	out := filepath.Join(t.TempDir(), "seen")
	id := &tfrunner.Identity{Token: []byte("eyJhbGciOiJSUzI1NiJ9.granted.sig"),
		Env:          map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/app"},
		TokenFileEnv: []string{"AWS_WEB_IDENTITY_TOKEN_FILE"},
		Google:       &tfrunner.GoogleIdentity{Audience: "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k"}}
	spec := func(run string, id *tfrunner.Identity) tfrunner.Spec {
		return tfrunner.Spec{Module: tfrunner.Module{Source: src}, Identity: id,
			Variables: map[string]any{"out": out, "run": run}}
	}

	if _, err := pool.Apply(ctx, "granted", spec("1", id), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ := os.ReadFile(out)
	token := filepath.Join(dir, "granted", "conductor.identity-token")
	creds := filepath.Join(dir, "granted", "conductor.google-credentials.json")
	lines := strings.SplitN(string(seen), "\n", 5)
	if len(lines) < 5 || lines[0] != "AWS_ROLE_ARN=arn:aws:iam::123456789012:role/app" ||
		lines[1] != "AWS_WEB_IDENTITY_TOKEN_FILE="+token || lines[2] != "GOOGLE_APPLICATION_CREDENTIALS="+creds ||
		lines[3] != string(id.Token) {
		t.Fatalf("the run saw\n%s", seen)
	}
	var cfg struct {
		Type, Audience   string
		SubjectTokenType string `json:"subject_token_type"`
		CredentialSource struct {
			File string
		} `json:"credential_source"`
	}
	if err := json.Unmarshal([]byte(lines[4]), &cfg); err != nil {
		t.Fatalf("the credential configuration %q: %v", lines[4], err)
	}
	if cfg.Type != "external_account" || cfg.Audience != id.Google.Audience ||
		cfg.SubjectTokenType != "urn:ietf:params:oauth:token-type:jwt" || cfg.CredentialSource.File != token {
		t.Fatalf("credential configuration %+v", cfg)
	}
	for _, f := range []string{token, creds} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("%s outlived the run: %v", f, err)
		}
	}

	if _, err := pool.Apply(ctx, "granted", spec("2", nil), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ = os.ReadFile(out)
	if string(seen) != "AWS_ROLE_ARN=\nAWS_WEB_IDENTITY_TOKEN_FILE=\nGOOGLE_APPLICATION_CREDENTIALS=\n" {
		t.Fatalf("a run granted nothing saw\n%s", seen)
	}
}

// onePool is a Pool of one run at a time with the first binary, in a directory of the test's,
// which it returns.
func onePool(t *testing.T) (*tfrunner.Pool, string) {
	t.Helper()
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bins[0], Dir: dir, Env: tfEnv, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	return pool, dir
}
