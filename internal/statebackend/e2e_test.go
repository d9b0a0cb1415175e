package statebackend

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// httpModule is a root module whose backend is configured only through TF_HTTP_* variables; its
// apply holds the lock while a provisioner sleeps, so the test can look at the lock.
const httpModule = `terraform {
  backend "http" {}
}
resource "random_pet" "p" {}
resource "terraform_data" "wait" {
  input = random_pet.p.id
  provisioner "local-exec" {
    command = "touch started && sleep 3"
  }
}
`

// TestServerWithRealClients runs real tofu and terraform against the server: init, apply and
// state list through `backend "http" {}` with only the environment of IssueRun; the lock names the
// run; a lock held by someone else, wrong credentials, another resource's credentials and a state
// of another lineage are refused; terraform's kubernetes backend reads the state the server wrote.
func TestServerWithRealClients(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	srv := startServer(t, testKube, ns, DefaultHistoryLimit)
	other, revokeOther := srv.IssueRun("someone-else", nil)
	defer revokeOther()
	for _, bin := range binaries(t) {
		t.Run(bin.name, func(t *testing.T) {
			suffix := "http-" + bin.name
			creds, revoke := srv.IssueRunAs("run-"+bin.name, suffix, map[string]string{LabelResource: suffix})
			defer revoke()
			env := creds.EnvList()
			dir := writeModule(t, httpModule)
			mustTF(t, bin.path, dir, env, "init", "-input=false")

			// apply, and while its provisioner sleeps, the lock it holds names the run.
			cmd := exec.Command(bin.path, "apply", "-auto-approve", "-input=false")
			cmd.Dir = dir
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, ".home"),
				"CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=" + os.Getenv("TF_CLI_CONFIG_FILE")}, env...)
			var buf strings.Builder
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, filepath.Join(dir, "started"), &buf)
			l, err := inspectLock(ctx, testKube, ns, DefaultWorkspace, suffix)
			if err != nil || l == nil || l.Info != "conductor-tf run run-"+bin.name || l.Who != Who() || l.Operation != "OperationTypeApply" {
				t.Errorf("lock during apply: %+v, %v", l, err)
			}
			if id, _ := RunOfLock(l); id != "run-"+bin.name {
				t.Errorf("RunOfLock = %q", id)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("apply: %v\n%s", err, buf.String())
			}
			if l, _ := inspectLock(ctx, testKube, ns, DefaultWorkspace, suffix); l != nil {
				t.Errorf("still locked after apply: %+v", l)
			}
			list := mustTF(t, bin.path, dir, env, "state", "list")
			if !strings.Contains(list, "random_pet.p") || !strings.Contains(list, "terraform_data.wait") {
				t.Fatalf("state list:\n%s", list)
			}
			serial, lineage, _ := pulled(t, mustTF(t, bin.path, dir, env, "state", "pull"))
			st, found, err := readStatus(ctx, testKube, ns, DefaultWorkspace, suffix, nil)
			if err != nil || !found || st.Serial != serial || st.Lineage != lineage || st.Resources != 2 {
				t.Fatalf("stored state %+v (%v, %v), pulled serial %d lineage %s", st, found, err, serial, lineage)
			}
			// The password is not stored in the working directory.
			if raw, err := os.ReadFile(filepath.Join(dir, ".terraform", "terraform.tfstate")); err != nil || strings.Contains(string(raw), creds.Password) {
				t.Errorf("the backend settings in .terraform hold the password (or are missing: %v)", err)
			}

			// Someone else's lock: the client refuses, naming the lock.
			theirs := Lock{ID: "cccccccc-0000-4000-8000-00000000000c", Operation: "OperationTypeApply", Who: "ops@laptop", Version: "1.11.4", Created: time.Now().UTC()}
			if _, err := NewStore(testKube, ns).For(suffix).Lock(ctx, theirs); err != nil {
				t.Fatal(err)
			}
			out, err := runTF(t, bin.path, dir, env, "plan", "-input=false")
			if err == nil || !strings.Contains(out, "Error acquiring the state lock") || !strings.Contains(out, theirs.ID) {
				t.Errorf("plan under someone's lock: %v\n%s", err, out)
			}
			// tofu prints the holder's Lock Info; terraform 1.11.4 prints its own (fixed after 1.11).
			if bin.name == "tofu" && !strings.Contains(out, "ops@laptop") {
				t.Errorf("tofu does not show the holder:\n%s", out)
			}
			if err := NewStore(testKube, ns).For(suffix).Unlock(ctx, theirs.ID); err != nil {
				t.Fatal(err)
			}

			// Wrong password; another resource's credentials.
			bad := append(append([]string{}, env...), "TF_HTTP_PASSWORD=wrong")
			if out, err := runTF(t, bin.path, dir, bad, "state", "list"); err == nil || !strings.Contains(out, "requires auth") {
				t.Errorf("wrong password: %v\n%s", err, out)
			}
			foreign := append(append([]string{}, env...), "TF_HTTP_USERNAME="+other.Username, "TF_HTTP_PASSWORD="+other.Password)
			if out, err := runTF(t, bin.path, dir, foreign, "state", "list"); err == nil || !strings.Contains(out, "invalid auth") {
				t.Errorf("another resource's credentials: %v\n%s", err, out)
			}

			// A state of another lineage, pushed with -force past the client's own check.
			var doc map[string]any
			raw := mustTF(t, bin.path, dir, env, "state", "pull")
			if err := json.Unmarshal([]byte(raw), &doc); err != nil {
				t.Fatal(err)
			}
			doc["lineage"] = "ffffffff-0000-4000-8000-00000000000f"
			doc["serial"] = serial + 10
			forged, _ := json.Marshal(doc)
			if err := os.WriteFile(filepath.Join(dir, "forged.tfstate"), forged, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := runTF(t, bin.path, dir, env, "state", "push", "-force", "forged.tfstate"); err == nil || !strings.Contains(out, "409") {
				t.Errorf("push of another lineage: %v\n%s", err, out)
			}
			if st, _, _ := readStatus(ctx, testKube, ns, DefaultWorkspace, suffix, nil); st.Lineage != lineage {
				t.Errorf("the stored lineage changed to %s", st.Lineage)
			}

			// A person's terraform with the kubernetes backend reads the same state.
			kdir := writeModule(t, kubernetesBackend(ns, suffix, ""))
			tf := binaries(t)[1].path
			mustTF(t, tf, kdir, nil, "init", "-input=false")
			if list := mustTF(t, tf, kdir, nil, "state", "list"); !strings.Contains(list, "random_pet.p") {
				t.Errorf("terraform's kubernetes backend lists:\n%s", list)
			}

			// A second apply keeps the first apply's version in history.
			mustTF(t, bin.path, dir, env, "apply", "-auto-approve", "-input=false", "-replace=random_pet.p")
			hist, err := NewStore(testKube, ns).For(suffix).History(ctx)
			if err != nil || len(hist) == 0 || hist[0].Serial != serial || hist[0].Lineage != lineage {
				t.Errorf("history after a second apply: %+v, %v; want serial %d first", hist, err, serial)
			}
		})
	}
}

// TestServerPendingWithTofu: tofu applies while the API server refuses writes of the state; the
// server keeps the state tofu sent (in memory and in its own Secret), and a server started
// afterwards — the controller killed and restarted — writes it back: tofu sees its resource.
func TestServerPendingWithTofu(t *testing.T) {
	ctx := context.Background()
	fk, fail := failingKube()
	srv := startServer(t, fk, "ns", DefaultHistoryLimit)
	creds, revoke := srv.IssueRun("pending", nil)
	defer revoke()
	env := creds.EnvList()
	tofu := binaries(t)[0].path
	dir := writeModule(t, "terraform {\n  backend \"http\" {}\n}\nresource \"random_pet\" \"p\" {}\n")
	mustTF(t, tofu, dir, env, "init", "-input=false")
	fail.Store(true)
	if out, err := runTF(t, tofu, dir, env, "apply", "-auto-approve", "-input=false"); err == nil {
		t.Fatalf("apply succeeded while state writes fail:\n%s", out)
	}
	p, ok := srv.Pending("pending")
	if !ok || !strings.Contains(string(p), "random_pet") {
		t.Fatalf("no pending state with the pet: %v %s", ok, p)
	}
	fail.Store(false)
	// The controller is killed here: a new server (a new process) finds the pending state in its
	// Secret and puts it back before any run.
	restarted := startServer(t, fk, "ns", DefaultHistoryLimit)
	if saved, err := restarted.RetryPending(ctx, "pending"); err != nil || !saved {
		t.Fatalf("RetryPending after a restart: saved=%v, %v", saved, err)
	}
	if list := mustTF(t, tofu, dir, env, "state", "list"); strings.TrimSpace(list) != "random_pet.p" {
		t.Fatalf("state list after RetryPending: %q", list)
	}
	if out, err := runTF(t, tofu, dir, env, "plan", "-detailed-exitcode", "-input=false"); err != nil {
		t.Fatalf("plan after RetryPending is not clean: %v\n%s", err, out)
	}
}

// waitFor waits until path exists (a provisioner has started), up to two minutes.
func waitFor(t *testing.T, path string, out *strings.Builder) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear:\n%s", path, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
