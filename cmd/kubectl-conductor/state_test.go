package main

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// holder is the holderIdentity of resource name's lock Lease ("" when unheld).
func holder(t *testing.T, name string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: ctrlNS, Name: "lock-tfstate-default-" + statebackend.SuffixFor(name)}
	if err := testClient.Get(context.Background(), key, l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func TestUnlockReleasesOnlyAStaleLock(t *testing.T) {
	// A live run's lock: refused, with the holder and since, and still held.
	refused(t, []string{"locked by conductor@conductor-tf since ", "(2m10s ago) under lock " + liveLock,
		"does not report this lock as stale: not released", "never a live run's or anyone's current lock"},
		"unlock", "bucket-live")
	if h := holder(t, "bucket-live"); h != liveLock {
		t.Errorf("live lock: Lease held by %q, want %q", h, liveLock)
	}
	// Reported stale under L3, but the Lease is now held under L4: refused, L4 kept.
	refused(t, []string{"stale lock L3 not released", "now locked by carol@ci", "lock L4"}, "unlock", "bucket-moved")
	if h := holder(t, "bucket-moved"); h != "L4" {
		t.Errorf("moved lock: Lease held by %q, want L4", h)
	}
	// Stale, and still held under the id reported: released.
	ok(t, []string{"Released the stale lock " + staleLock + " on the state of InfraResource team-a-bucket (claim team-a/bucket).\n" +
		"It was held by alice@laptop since ", " (3h ago); Lease conductor-system/lock-tfstate-default-team-a-bucket.\n"},
		"unlock", "bucket", "-n", claimNS)
	if h := holder(t, "team-a-bucket"); h != "" {
		t.Errorf("stale lock: Lease still held by %q", h)
	}
	lock, err := statebackend.NewStore(testKube, ctrlNS).For("team-a-bucket").InspectLock(context.Background())
	if err != nil || lock != nil {
		t.Errorf("InspectLock after unlock: %+v, %v", lock, err)
	}
	refused(t, []string{"not released", "the state is no longer locked"}, "unlock", "team-a-bucket")
	refused(t, []string{"lock Lease other/lock-tfstate-default-bucket-moved does not exist"},
		"unlock", "bucket-moved", "--controller-namespace", "other")
}

func TestRestoreStateListsHistoryAndRequestsOnlyAKeptSerial(t *testing.T) {
	const key = v1alpha1.AnnotationRestoreState
	out := ok(t, []string{"State of InfraResource team-a-bucket: Secret conductor-system/tfstate-default-team-a-bucket, current serial 4, lineage x.\n",
		"Restore one with: kubectl conductor restore-state team-a-bucket --serial N\n"}, "restore-state", "team-a-bucket")
	if got := row(t, out, "SERIAL"); got != "SERIAL LINEAGE REPLACED AT" {
		t.Errorf("header %q", got)
	}
	for _, s := range []string{"3", "2", "1"} {
		if got := row(t, out, s); !strings.HasPrefix(got, s+" x 20") || !strings.HasSuffix(got, " ago)") {
			t.Errorf("version row %q", got)
		}
	}
	if a, b, c := strings.Index(out, "\n3 "), strings.Index(out, "\n2 "), strings.Index(out, "\n1 "); !(a < b && b < c) {
		t.Errorf("history not newest first:\n%s", out)
	}
	ok(t, []string{"No earlier versions are kept.\n"}, "restore-state", "bucket-moved")

	refused(t, []string{"serial 9 is not in the state's history (kept serials: 3, 2, 1); nothing requested"},
		"restore-state", "team-a-bucket", "--serial", "9")
	refused(t, []string{"serial 4 is not in the state's history"}, "restore-state", "team-a-bucket", "--serial", "4")
	refused(t, []string{"serial 1 is not in the state's history (no earlier versions are kept)"},
		"restore-state", "bucket-moved", "--serial", "1")
	refused(t, []string{"version 1 has lineage x, the current state lineage y: it is another state"},
		"restore-state", "bucket-live", "--serial", "1")
	for _, name := range []string{"team-a-bucket", "bucket-moved", "bucket-live"} {
		if v, found := annotation(t, name, key); found {
			t.Errorf("%s annotated %s=%s after a refusal", name, key, v)
		}
	}
	ok(t, []string{"Asked the controller to restore serial 2 of the state of InfraResource team-a-bucket (claim team-a/bucket) (lineage x, replaced ",
		"with serial 5; the state it replaces stays in the history"}, "restore-state", "bucket", "-n", claimNS, "--serial", "2")
	if v, _ := annotation(t, "team-a-bucket", key); v != "2" {
		t.Errorf("%s=%q, want 2", key, v)
	}
}

func TestInputsListsTheModulesInputsAndOutputs(t *testing.T) {
	out := ok(t, []string{"InfraClass minio-bucket: module git::https://example.org/modules.git//minio-bucket version v0.1.0\n",
		"\nInputs:\n", "\nOutputs:\n"}, "inputs", "minio-bucket")
	in, outs, _ := strings.Cut(out, "\nOutputs:\n")
	for first, want := range map[string]string{
		"NAME":        "NAME TYPE REQUIRED DESCRIPTION",
		"bucket_name": "bucket_name string true Name of the bucket.",
		"quota_gib":   "quota_gib number false Hard quota in GiB; 0 for none.",
		"secret_key":  "secret_key string (sensitive) true Key of the bucket's user.",
		"tags":        "tags map(string) false -",
	} {
		if got := row(t, in, first); got != want {
			t.Errorf("input row %q, want %q", got, want)
		}
	}
	for first, want := range map[string]string{
		"NAME":       "NAME SENSITIVE DESCRIPTION",
		"endpoint":   "endpoint false S3 endpoint URL.",
		"secret_key": "secret_key true Secret key of the bucket's user.",
	} {
		if got := row(t, outs, first); got != want {
			t.Errorf("output row %q, want %q", got, want)
		}
	}
	refused(t, []string{`no InfraClass "nope"`}, "inputs", "nope")
}
