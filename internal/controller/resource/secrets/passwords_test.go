package secrets

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// A resource's generated passwords: made once and kept, given to runs as ephemeral variables with
// their versions, made again (new versions) only when rotation is asked with a new value, written
// into the connection data, and reclaimed as the state is.
func TestGeneratedPasswords(t *testing.T) {
	ctx := context.Background()
	res := passwordResource("db-1",
		v1alpha1.GeneratedPassword{Variable: "master_password", VersionVariable: "master_password_version", ConnectionSecretKey: "password"},
		v1alpha1.GeneratedPassword{Variable: "replica_password", Length: 64})
	res.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
	r, c, rec := newTestKeeper()

	spec := tfrunner.Spec{}
	if due, err := r.PasswordInputs(ctx, res, &spec, false); err != nil || !due || len(spec.EphemeralVariables) != 0 {
		t.Fatalf("before any run, a read-only look: due %v, %v, %v; want due, nothing made", due, spec.EphemeralVariables, err)
	}
	first := tfrunner.Spec{}
	if _, err := r.PasswordInputs(ctx, res, &first, true); err != nil {
		t.Fatal(err)
	}
	master, replica := first.EphemeralVariables["master_password"], first.EphemeralVariables["replica_password"]
	if len(master) != 32 || len(replica) != 64 || strings.Trim(master+replica, passwordAlphabet) != "" || master == replica[:32] {
		t.Fatalf("passwords %q, %q: want 32 and 64 letters and digits, different", master, replica)
	}
	version, ok := first.Variables["master_password_version"].(int64)
	if !ok || version <= 0 {
		t.Fatalf("version variable = %#v", first.Variables["master_password_version"])
	}
	if _, ok := first.Variables["replica_password_version"]; ok || len(first.Variables) != 1 {
		t.Fatalf("variables %v: only the version variable a password names", first.Variables)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: "tfpassword-" + res.Status.State.SecretName}, secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data["password.master_password"]) != master || secret.Labels[statebackend.LabelResource] != "db-1" {
		t.Fatalf("password Secret %v, labels %v", secret.Data, secret.Labels)
	}

	again := tfrunner.Spec{}
	if _, err := r.PasswordInputs(ctx, res, &again, true); err != nil || again.EphemeralVariables["master_password"] != master || again.Variables["master_password_version"] != version {
		t.Fatalf("a second run made new passwords: %v, %v", again.EphemeralVariables, err)
	}
	if due, _ := r.PasswordInputs(ctx, res, &tfrunner.Spec{}, false); due {
		t.Fatal("kept passwords are due")
	}
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("kept passwords give other inputs: %+v, then %+v", first, again)
	}

	res.Annotations = map[string]string{v1alpha1.AnnotationRotatePasswords: "2026-11-29T16:00:00Z"}
	if due, _ := r.PasswordInputs(ctx, res, &tfrunner.Spec{}, false); !due {
		t.Fatal("a rotation asked is not due")
	}
	rotated := tfrunner.Spec{}
	if _, err := r.PasswordInputs(ctx, res, &rotated, true); err != nil {
		t.Fatal(err)
	}
	if rotated.EphemeralVariables["master_password"] == master || rotated.EphemeralVariables["replica_password"] == replica {
		t.Fatal("rotation kept a password")
	}
	if v := rotated.Variables["master_password_version"].(int64); v <= version {
		t.Fatalf("rotated version %d, not above %d", v, version)
	}
	if e := <-rec.Events; !strings.Contains(e, v1alpha1.ReasonPasswordsRotated) {
		t.Fatalf("event %q", e)
	}
	same := tfrunner.Spec{}
	if _, err := r.PasswordInputs(ctx, res, &same, true); err != nil || same.EphemeralVariables["master_password"] != rotated.EphemeralVariables["master_password"] {
		t.Fatal("the same rotation value rotated twice")
	}

	outs := map[string]tfjson.Output{"endpoint": {Value: json.RawMessage(`"db.example"`)}, "password": {Value: json.RawMessage(`"from-output"`), Sensitive: true}}
	data := connectionData(WithPasswords(res, outs, same.EphemeralVariables))
	if string(data["password"]) != same.EphemeralVariables["master_password"] || string(data["replica_password"]) != same.EphemeralVariables["replica_password"] || string(data["endpoint"]) != "db.example" {
		t.Fatalf("connection data %v", data)
	}
	if string(outs["password"].Value) != `"from-output"` {
		t.Fatal("WithPasswords changed the outputs it was given")
	}

	retained := res.DeepCopy()
	retained.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
	if err := r.ReclaimPasswords(ctx, retained); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: secret.Name}, secret); err != nil ||
		secret.Labels[statebackend.LabelOrphanedFrom] != "db-1" || secret.Labels[statebackend.LabelResource] != "" {
		t.Fatalf("Retain: %v, labels %v", err, secret.Labels)
	}
	if err := r.ReclaimPasswords(ctx, res); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: testNamespace, Name: secret.Name}, secret); err == nil {
		t.Fatal("Delete kept the password Secret")
	}
	if err := r.ReclaimPasswords(ctx, res); err != nil {
		t.Fatalf("reclaiming a missing password Secret: %v", err)
	}
}
