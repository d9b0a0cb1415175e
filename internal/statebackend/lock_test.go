package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAcquireLockAndUnlock(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	created := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	ops := Lock{ID: "11111111-1111-4111-8111-111111111111", Operation: "OperationTypeApply", Who: "ops@laptop", Version: "1.11.4", Created: created}
	held, err := acquireFresh(ctx, testKube, ns, "default", "db", map[string]string{LabelResource: "db"}, ops)
	if err != nil || held.ID != ops.ID {
		t.Fatalf("AcquireLock = %+v, %v", held, err)
	}
	lease, err := testKube.CoordinationV1().Leases(ns).Get(ctx, "lock-tfstate-default-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"tfstate": "true", "tfstateSecretSuffix": "db", "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform", LabelResource: "db"} {
		if lease.Labels[k] != v {
			t.Errorf("Lease label %s = %q, want %q", k, lease.Labels[k], v)
		}
	}
	if *lease.Spec.HolderIdentity != ops.ID {
		t.Errorf("holderIdentity %q", *lease.Spec.HolderIdentity)
	}
	// The annotation is Terraform's LockInfo JSON, fields in statemgr.LockInfo's order.
	want := `{"ID":"11111111-1111-4111-8111-111111111111","Operation":"OperationTypeApply","Info":"","Who":"ops@laptop","Version":"1.11.4","Created":"2026-11-20T10:00:00Z","Path":""}`
	if got := lease.Annotations["app.terraform.io/lock-info"]; got != want {
		t.Errorf("lock-info annotation\n got %s\nwant %s", got, want)
	}
	if again, err := acquireFresh(ctx, testKube, ns, "default", "db", nil, ops); err != nil || again.Who != "ops@laptop" {
		t.Errorf("taking the same lock again = %+v, %v", again, err)
	}
	other := Lock{ID: "22222222-2222-4222-8222-222222222222", Who: "conductor@ctl", Created: created}
	holder, err := acquireFresh(ctx, testKube, ns, "default", "db", nil, other)
	var locked *LockedError
	if !errors.As(err, &locked) || holder == nil || holder.Who != "ops@laptop" || locked.Holder.ID != ops.ID {
		t.Fatalf("a held lock taken by another = %+v, %v", holder, err)
	}
	if !strings.Contains(err.Error(), "ops@laptop") {
		t.Errorf("LockedError does not name the holder: %v", err)
	}
	if err := unlockFresh(ctx, testKube, ns, "default", "db", other.ID); !errors.As(err, &locked) {
		t.Errorf("unlock under another ID = %v", err)
	}
	if err := unlockFresh(ctx, testKube, ns, "default", "db", ops.ID); err != nil {
		t.Fatal(err)
	}
	if l, err := inspectLock(ctx, testKube, ns, "default", "db"); l != nil || err != nil {
		t.Fatalf("after Unlock: %+v, %v", l, err)
	}
	if err := unlockFresh(ctx, testKube, ns, "default", "db", ops.ID); err != nil {
		t.Errorf("unlocking an unlocked state: %v", err)
	}
	if _, err := acquireFresh(ctx, testKube, ns, "default", "db", nil, other); err != nil {
		t.Errorf("taking the released lock: %v", err)
	}
}

// TestAcquireLockRace has many callers take the same lock at once, on a missing Lease and on an
// unheld one: exactly one wins each round.
func TestAcquireLockRace(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for round := range 6 {
		const callers = 8
		var wg sync.WaitGroup
		wins := make(chan string, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("round-%d-caller-%d", round, i)
				if _, err := acquireFresh(ctx, testKube, ns, "default", "race", nil, Lock{ID: id, Who: id}); err == nil {
					wins <- id
				} else if !errors.As(err, new(*LockedError)) {
					t.Errorf("caller %s: %v", id, err)
				}
			}()
		}
		wg.Wait()
		close(wins)
		var won []string
		for id := range wins {
			won = append(won, id)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d callers hold the lock: %v", round, len(won), won)
		}
		l, _ := inspectLock(ctx, testKube, ns, "default", "race")
		if l == nil || l.ID != won[0] {
			t.Fatalf("round %d: Lease holds %+v, winner %s", round, l, won[0])
		}
		if err := unlockFresh(ctx, testKube, ns, "default", "race", won[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLocksWithTerraform: the real terraform honours a lock taken by AcquireLock and names its
// holder; AcquireLock honours a lock the real terraform holds and reads its info.
func TestLocksWithTerraform(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tf := binaries(t)[1].path
	dir := writeModule(t, kubernetesBackend(ns, "locked", `
resource "terraform_data" "wait" {
  input = "x"
  provisioner "local-exec" {
    command = "touch started && sleep 8"
  }
}
`))
	mustTF(t, tf, dir, nil, "init", "-input=false")
	ours := Lock{ID: "33333333-3333-4333-8333-333333333333", Operation: "restore", Who: "ops@laptop", Version: "conductor-tf", Created: time.Now().UTC()}
	if _, err := acquireFresh(ctx, testKube, ns, "default", "locked", nil, ours); err != nil {
		t.Fatal(err)
	}
	out, err := runTF(t, tf, dir, nil, "plan", "-input=false")
	if err == nil || !strings.Contains(out, "Error acquiring the state lock") || !strings.Contains(out, ours.ID) || !strings.Contains(out, "ops@laptop") {
		t.Fatalf("terraform plan under our lock: %v\n%s", err, out)
	}
	if err := unlockFresh(ctx, testKube, ns, "default", "locked", ours.ID); err != nil {
		t.Fatal(err)
	}

	// terraform apply holds the lock while its provisioner sleeps.
	cmd := exec.Command(tf, "apply", "-auto-approve", "-input=false")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, ".home"), "CHECKPOINT_DISABLE=1")
	var buf strings.Builder
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("terraform apply did not start its provisioner:\n%s", buf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	holder, err := acquireFresh(ctx, testKube, ns, "default", "locked", nil, Lock{ID: "44444444-4444-4444-8444-444444444444", Who: "conductor@ctl"})
	if !errors.As(err, new(*LockedError)) || holder == nil || holder.Operation != "OperationTypeApply" || holder.Who != Who() || holder.Version != "1.11.4" {
		t.Fatalf("our lock over terraform's = %+v, %v", holder, err)
	}
	// terraform's annotation decodes into Lock and encodes back to the same bytes.
	lease, err := testKube.CoordinationV1().Leases(ns).Get(ctx, "lock-tfstate-default-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw := lease.Annotations["app.terraform.io/lock-info"]
	var l Lock
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(l); string(again) != raw {
		t.Errorf("terraform's lock info\n %s\nre-encodes as\n %s", raw, again)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("terraform apply: %v\n%s", err, buf.String())
	}
	if l, err := inspectLock(ctx, testKube, ns, "default", "locked"); l != nil || err != nil {
		t.Errorf("after terraform's apply: %+v, %v", l, err)
	}
}
