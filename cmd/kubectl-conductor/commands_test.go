package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// conductorWith runs `kubectl conductor args...` through the cobra tree with this kubeconfig and
// returns what it wrote to its output.
func conductorWith(t *testing.T, kc string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, clock)
	cmd.SetArgs(append(args, "--kubeconfig", kc))
	err := cmd.ExecuteContext(context.Background())
	t.Logf("$ kubectl conductor %s\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		t.Logf("error: %v", err)
	}
	return out.String(), err
}

// ok runs the command, fails the test on an error, and checks that the output has each of want.
func ok(t *testing.T, want []string, args ...string) string {
	t.Helper()
	out, err := conductorWith(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl conductor %v: %v", args, err)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl conductor %v: output lacks %q:\n%s", args, w, out)
		}
	}
	return out
}

// refused runs the command and checks that it fails with an error that has each of want.
func refused(t *testing.T, want []string, args ...string) {
	t.Helper()
	_, err := conductorWith(t, kubeconfig, args...)
	if err == nil {
		t.Fatalf("kubectl conductor %v succeeded; want an error", args)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("kubectl conductor %v: error lacks %q: %v", args, w, err)
		}
	}
}

// row returns the line of out whose first field is first, its fields joined by single spaces.
func row(t *testing.T, out, first string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return strings.Join(f, " ")
		}
	}
	t.Errorf("no row %q in:\n%s", first, out)
	return ""
}

// annotation reads an annotation of an InfraResource.
func annotation(t *testing.T, name, key string) (string, bool) {
	t.Helper()
	res := &v1alpha1.InfraResource{}
	if err := testClient.Get(context.Background(), types.NamespacedName{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	v, found := res.Annotations[key]
	return v, found
}

func TestHelpNamesEveryCommandWithAnExample(t *testing.T) {
	root := NewRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	want := []string{"adopt", "approve", "creates", "inputs", "logs", "pause", "plan", "restore-state", "resume", "rotate-passwords", "runs", "sync", "tree", "unlock", "upgrade"}
	var got []string
	for _, c := range root.Commands() {
		got = append(got, c.Name())
		_, example, _ := strings.Cut(c.Long, "\nExample:\n")
		if c.Short == "" || !strings.Contains(example, "  kubectl conductor "+c.Name()+" ") {
			t.Errorf("%s: want a Short and a Long with an example of it; got %q / %q", c.Name(), c.Short, c.Long)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("commands %v, want %v", got, want)
	}
	for _, f := range []string{"kubeconfig", "context", "namespace", "controller-namespace"} {
		if root.PersistentFlags().Lookup(f) == nil {
			t.Errorf("no --%s flag", f)
		}
	}
}

func TestTargetIsAResourceOrABoundClaim(t *testing.T) {
	refused(t, []string{`no InfraResource "nope", and no InfraClaim "nope" in namespace "default"`}, "plan", "nope")
	refused(t, []string{`no InfraClaim "bucket" in namespace "default"`}, "plan", "bucket")
	refused(t, []string{"InfraClaim team-a/pending is not bound to a resource yet (phase Pending)"}, "runs", "pending", "-n", claimNS)
	ok(t, []string{"InfraResource team-a-bucket (claim team-a/bucket)"}, "plan", "bucket", "-n", claimNS)

	// Without -n, the kubeconfig context's namespace.
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = claimNS
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	out, err := conductorWith(t, kc, "plan", "bucket")
	if err != nil || !strings.Contains(out, "(claim team-a/bucket)") {
		t.Errorf("plan bucket in the context's namespace: %v\n%s", err, out)
	}
}

// Issue 33: a bare NAME preferred the InfraResource NAME even with -n naming a namespace whose claim
// NAME is bound to another resource, and a claim's status.resourceName was trusted without the
// resource's claimRef (a Lost claim keeps it): approve, unlock, restore-state and the others could
// act on another team's resource.
func TestTargetNamesTheRightObject(t *testing.T) {
	refused(t, []string{`"shared" names both InfraResource shared and InfraClaim team-b/shared (bound to shared-x1): say resource/shared or claim/shared`},
		"plan", "shared", "-n", "team-b")
	ok(t, []string{"InfraResource shared-x1 (claim team-b/shared)"}, "plan", "claim/shared", "-n", "team-b")
	ok(t, []string{"InfraResource shared: no plan waits for approval"}, "plan", "resource/shared", "-n", "team-b")
	refused(t, []string{"InfraClaim team-b/lost (phase Lost) names InfraResource team-a-bucket, which is not bound to it"},
		"approve", "lost", "-n", "team-b")
	refused(t, []string{"InfraClaim team-b/lost (phase Lost) names InfraResource team-a-bucket, which is not bound to it"},
		"unlock", "claim/lost", "-n", "team-b")
	refused(t, []string{`no InfraResource "nope"`}, "plan", "resource/nope")
	ok(t, []string{"InfraResource team-a-bucket (claim team-a/bucket)"}, "plan", "bucket", "-n", claimNS)
}

func TestPlanShowsThePendingPlanAndTerraformsRendering(t *testing.T) {
	ok(t, []string{
		"InfraResource team-a-bucket (claim team-a/bucket): a plan waits for approval.\n",
		"Plan:        " + planID + "\n",
		"Reason:      DestructiveChange\n",
		"Generation:  1\n",
		" (9m29s ago)\n",
		"Summary:     +1 ~1 -1\n",
		"Changes:\n  minio_s3_bucket.this: update\n  minio_iam_user.reader: delete\n  minio_s3_bucket_versioning.this: create\n",
		"Terraform's plan (Secret conductor-system/plan-team-a-bucket-" + planID + ", key plan.txt):\n" + planText,
		"Approve it with: kubectl conductor approve team-a-bucket --plan " + planID + "\n",
	}, "plan", "bucket", "-n", claimNS)

	out := ok(t, []string{"InfraResource bucket-live: no plan waits for approval.\n"}, "plan", "bucket-live")
	if got := strings.TrimSpace(strings.SplitN(out, "\n", 2)[1]); got != "Last run: apply Running 2m10s ago, run e5f6a7b8, plan 77aa88bb99cc" {
		t.Errorf("last run line %q", got)
	}
}

func TestApproveAnnotatesOnlyThePendingPlan(t *testing.T) {
	const key = v1alpha1.AnnotationApprovePlan
	refused(t, []string{"InfraResource bucket-live: no plan waits for approval"}, "approve", "bucket-live")
	if _, found := annotation(t, "bucket-live", key); found {
		t.Error("bucket-live annotated without a pending plan")
	}
	refused(t, []string{"the plan that waits for approval is " + planID + ", not 000000000000", "plan changed"},
		"approve", "team-a-bucket", "--plan", "000000000000")
	if v, found := annotation(t, "team-a-bucket", key); found {
		t.Errorf("annotated %s=%s for another plan id", key, v)
	}
	ok(t, []string{"Approved plan " + planID + " of InfraResource team-a-bucket (claim team-a/bucket): +1 ~1 -1, waiting because DestructiveChange"},
		"approve", "bucket", "-n", claimNS, "--plan", planID)
	if v, _ := annotation(t, "team-a-bucket", key); v != planID {
		t.Errorf("%s=%q, want %q", key, v, planID)
	}
	ok(t, []string{"Plan " + planID + " of InfraResource team-a-bucket is already approved"}, "approve", "team-a-bucket")
}

// Issue 48 item 3: pause and resume set and remove conductor.io/paused (each says when there is
// nothing to do); sync writes the request's time, which the controller echoes when it runs.
func TestPauseResumeAndSyncAnnotateTheResource(t *testing.T) {
	ok(t, []string{"Paused InfraResource bucket-live: no plan, apply or drift check starts"}, "pause", "bucket-live")
	if v, _ := annotation(t, "bucket-live", v1alpha1.AnnotationPaused); v != "true" {
		t.Fatalf("%s=%q after pause, want true", v1alpha1.AnnotationPaused, v)
	}
	ok(t, []string{"InfraResource bucket-live is already paused."}, "pause", "resource/bucket-live")
	ok(t, []string{"Requested a sync of InfraResource bucket-live at ", "It is paused: the request waits"}, "sync", "bucket-live")
	if v, _ := annotation(t, "bucket-live", v1alpha1.AnnotationReconcileRequestedAt); v != clock().UTC().Format(time.RFC3339Nano) {
		t.Errorf("%s=%q, want the command's clock", v1alpha1.AnnotationReconcileRequestedAt, v)
	}
	ok(t, []string{"Resumed InfraResource bucket-live: the controller syncs it now."}, "resume", "bucket-live")
	if _, found := annotation(t, "bucket-live", v1alpha1.AnnotationPaused); found {
		t.Errorf("%s still set after resume", v1alpha1.AnnotationPaused)
	}
	ok(t, []string{"InfraResource bucket-live is not paused."}, "resume", "bucket-live")
}

// rotate-passwords writes the request's time into conductor.io/rotate-passwords, and refuses a
// resource that generates no password.
func TestRotatePasswordsAnnotatesTheResource(t *testing.T) {
	refused(t, []string{"has no generated passwords (spec.generatedPasswords): nothing to rotate"}, "rotate-passwords", "bucket-live")
	if _, found := annotation(t, "bucket-live", v1alpha1.AnnotationRotatePasswords); found {
		t.Fatal("a refused rotation annotated the resource")
	}
	ok(t, []string{"Requested new passwords for InfraResource team-a-bucket at "}, "rotate-passwords", "team-a-bucket")
	if v, _ := annotation(t, "team-a-bucket", v1alpha1.AnnotationRotatePasswords); v != clock().UTC().Format(time.RFC3339Nano) {
		t.Errorf("%s=%q, want the command's clock", v1alpha1.AnnotationRotatePasswords, v)
	}
}

func TestCreatesShowsWhatIsInDoubtAndResolvesIt(t *testing.T) {
	ok(t, []string{
		"InfraResource db-in-doubt: a run that died had started creating, and may have created:\n",
		"  module.main.local_file.a  import identity: -\n",
		"Left by run 0badc0de; interruptedCreates: Resolve\n",
		"  Held     module.main.local_file.a: no import identity is declared for it (importIdentities)\n",
		"  Adopted  module.main.kubernetes_secret_v1.b: the object exists and was imported into state\n",
		"Plan aa11bb22cc33 waits (+1 ~0 -0): kubectl conductor plan db-in-doubt\n",
	}, "creates", "db-in-doubt")
	ok(t, []string{"InfraResource bucket-live: no create is in doubt."}, "creates", "bucket-live")
	refused(t, []string{"no create is in doubt"}, "creates", "bucket-live", "--approve")
	refused(t, []string{"is not being deleted"}, "creates", "db-in-doubt", "--abandon")
	refused(t, []string{"ADDRESS=ID"}, "creates", "db-in-doubt", "--import", "local_file.a")
	refused(t, []string{"local_file.other is not in doubt"}, "creates", "db-in-doubt", "--import", "local_file.other=x")
	// Issue 46: --import goes to spec.import, which fails the run on an ID that names nothing
	// (ImportFailed) instead of reading it as "never created"; again replaces the entry.
	ok(t, []string{"local_file.a added to spec.import with ID /srv/typo"}, "creates", "db-in-doubt", "--import", "local_file.a=/srv/typo")
	ok(t, []string{"local_file.a added to spec.import with ID /srv/a"}, "creates", "db-in-doubt", "--import", "module.main.local_file.a=/srv/a")
	res := &v1alpha1.InfraResource{}
	if err := testClient.Get(context.Background(), types.NamespacedName{Name: "db-in-doubt"}, res); err != nil {
		t.Fatal(err)
	}
	if want := []v1alpha1.ImportTarget{{Address: "local_file.a", ID: "/srv/a"}}; !reflect.DeepEqual(res.Spec.Import, want) {
		t.Errorf("spec.import = %+v, want %+v", res.Spec.Import, want)
	}
	if _, set := res.Spec.ImportIdentities["local_file.a"]; set {
		t.Error("--import set an import identity, which a run takes as \"never created\" when it names nothing")
	}
	ok(t, []string{"Approved plan aa11bb22cc33 of InfraResource db-in-doubt"}, "creates", "db-in-doubt", "--approve")
	if v, _ := annotation(t, "db-in-doubt", v1alpha1.AnnotationApprovePlan); v != "aa11bb22cc33" {
		t.Errorf("approve-plan=%q", v)
	}
}

// A run that died during its apply before it could record its creates leaves the mark "*": any
// create outside the state is in doubt, so --import takes any address.
func TestCreatesShowsUnrecordedCreates(t *testing.T) {
	ok(t, []string{"  *  any create outside the state: the run died during its apply before it could record which it had started"}, "creates", "db-unrecorded")
	ok(t, []string{"local_file.f added to spec.import with ID /srv/f"}, "creates", "db-unrecorded", "--import", "local_file.f=/srv/f")
}

func TestRunsNewestFirstWithTheFailure(t *testing.T) {
	out := ok(t, []string{"\nRun 9b2d4f10 (apply, 4h ago) failed:\n  Error: creating bucket: AccessDenied: Access Denied\n    with minio_s3_bucket.this\n"},
		"runs", "team-a-bucket")
	if got := row(t, out, "RUN"); got != "RUN OPERATION RESULT STARTED WAITED DURATION CHANGES PLAN CONTROLLER" {
		t.Errorf("header %q", got)
	}
	for first, want := range map[string]string{
		"c4e8a2f6": "c4e8a2f6 plan Succeeded 10m ago 24s 41s +1 ~1 -1 " + planID + " conductor-tf-7d9f8c6b5-x2k4p",
		"9b2d4f10": "9b2d4f10 apply Failed 4h ago - 95s - aa11bb22cc33 conductor-tf-7d9f8c6b5-x2k4p",
		"0a1b2c3d": "0a1b2c3d apply Succeeded 26h ago - 3m +2 ~0 -0 0f0e0d0c0b0a conductor-tf-7d9f8c6b5-q8z7m",
	} {
		if got := row(t, out, first); got != want {
			t.Errorf("row %q, want %q", got, want)
		}
	}
	if a, b, c := strings.Index(out, "c4e8a2f6"), strings.Index(out, "9b2d4f10 "), strings.Index(out, "0a1b2c3d"); !(a < b && b < c) {
		t.Errorf("runs not newest first:\n%s", out)
	}
	out = ok(t, nil, "runs", "bucket-live")
	if got := row(t, out, "e5f6a7b8"); got != "e5f6a7b8 apply Running 2m10s ago - running - 77aa88bb99cc conductor-tf-7d9f8c6b5-x2k4p" {
		t.Errorf("running row %q", got)
	}
	ok(t, []string{"InfraResource bucket-moved: no runs recorded.\n"}, "runs", "bucket-moved")
}

func TestLogsOfTheLastRunOrOneNamed(t *testing.T) {
	if out := ok(t, nil, "logs", "bucket", "-n", claimNS); out != "Initializing modules...\nPlan: 1 to add, 1 to change, 1 to destroy.\n" {
		t.Errorf("last run's log %q", out)
	}
	if out := ok(t, nil, "logs", "team-a-bucket", "--run", "9b2d"); out != "minio_s3_bucket.this: Creating...\nError: creating bucket: AccessDenied\n" {
		t.Errorf("failed run's log %q", out)
	}
	refused(t, []string{"no run with id ffff"}, "logs", "team-a-bucket", "--run", "ffff")
	ok(t, []string{"InfraResource bucket-live: run e5f6a7b8 (apply Running) kept no log.\n"}, "logs", "bucket-live")
	ok(t, []string{"InfraResource bucket-moved: no run yet, so no log.\n"}, "logs", "bucket-moved")
	refused(t, []string{"Secret other/run-log-c4e8a2f6", "is gone"}, "logs", "team-a-bucket", "--controller-namespace", "other")
}

// TestMessagesNameCommandsThatExist: every `kubectl conductor <command>` the controller's
// conditions, events and the docs tell an operator to run is a command of the plugin (issue 46:
// a Delete reclaim with creates in doubt named `resolve-creates`, which did not exist).
func TestMessagesNameCommandsThatExist(t *testing.T) {
	root := NewRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	commands := map[string]bool{"help": true, "completion": true}
	for _, c := range root.Commands() {
		commands[c.Name()] = true
	}
	mention := regexp.MustCompile(`kubectl conductor ([a-z][a-z-]*)`)
	var files []string
	for _, glob := range []string{"../../internal/controller/*/*.go", "../../docs/*.md", "../../README.md"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files to read: %v", len(files), files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(data), -1) {
			if !commands[m[1]] {
				t.Errorf("%s names `kubectl conductor %s`, which is no command of the plugin", f, m[1])
			}
		}
	}
}
