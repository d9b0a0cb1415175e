package main

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// classResource creates a resource of class "blobs" on v0.1.0 that reports available (empty: none).
func classResource(t *testing.T, name, available string) {
	t.Helper()
	res := resource(name)
	res.Spec.ClassRef = &v1alpha1.ClassReference{Name: "blobs"}
	if err := createWithStatus(context.Background(), res, func() { res.Status.AvailableModuleVersion = available }); err != nil {
		t.Fatal(err)
	}
}

func moduleVersion(t *testing.T, name string) string {
	t.Helper()
	res := &v1alpha1.InfraResource{}
	if err := testClient.Get(context.Background(), types.NamespacedName{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	return res.Spec.Module.Version
}

// The plan that --wait shows is the controller's: test/lifecycle's upgrade spec runs the built
// plugin against a real controller. These check what the command decides and writes.
func TestUpgradeMovesResourcesToTheAvailableVersion(t *testing.T) {
	classResource(t, "blobs-a", "v0.2.0")
	classResource(t, "blobs-b", "v0.2.0")
	classResource(t, "blobs-current", "")

	out := ok(t, []string{"Would upgrade (dry run, nothing changed)"}, "upgrade", "--class", "blobs", "--dry-run")
	if got := row(t, out, "blobs-a"); got != "blobs-a - v0.1.0 v0.2.0" {
		t.Errorf("row %q", got)
	}
	if moduleVersion(t, "blobs-a") != "v0.1.0" {
		t.Errorf("--dry-run changed spec.module.version")
	}

	out = ok(t, []string{"Upgrading:", "kubectl conductor plan RESOURCE"}, "upgrade", "--class", "blobs")
	row(t, out, "blobs-b")
	for name, want := range map[string]string{"blobs-a": "v0.2.0", "blobs-b": "v0.2.0", "blobs-current": "v0.1.0"} {
		if got := moduleVersion(t, name); got != want {
			t.Errorf("%s: spec.module.version %s, want %s", name, got, want)
		}
	}

	ok(t, []string{"No resource of InfraClass none has an upgrade available."}, "upgrade", "--class", "none")
	refused(t, []string{"InfraResource blobs-current is on v0.1.0", "offers no newer version", "--to VERSION"}, "upgrade", "blobs-current")
	ok(t, []string{"blobs-current", "v0.1.0", "v0.3.0"}, "upgrade", "blobs-current", "--to", "v0.3.0")
	if got := moduleVersion(t, "blobs-current"); got != "v0.3.0" {
		t.Errorf("--to: spec.module.version %s, want v0.3.0", got)
	}
	refused(t, []string{"already at module version v0.3.0"}, "upgrade", "blobs-current", "--to", "v0.3.0")
	refused(t, []string{"name one resource or claim, or --class NAME"}, "upgrade")
	refused(t, []string{"--to applies to one resource"}, "upgrade", "--class", "blobs", "--to", "v1")
}
