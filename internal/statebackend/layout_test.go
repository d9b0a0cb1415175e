package statebackend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stateJSON is a Terraform v4 state with one terraform_data resource per name, whose input is
// that many bytes of incompressible text (base64 of random bytes). terraform_data needs no
// provider, so any terraform or tofu reads it.
func stateJSON(t *testing.T, lineage string, serial int64, inputs map[string]int) []byte {
	t.Helper()
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	resources := []any{}
	for _, n := range names {
		raw := make([]byte, inputs[n]*3/4+1)
		_, _ = rand.Read(raw)
		input := base64.StdEncoding.EncodeToString(raw)[:inputs[n]]
		resources = append(resources, map[string]any{
			"mode": "managed", "type": "terraform_data", "name": n,
			"provider": `provider["terraform.io/builtin/terraform"]`,
			"instances": []any{map[string]any{
				"schema_version": 0,
				"attributes": map[string]any{
					"id": "4b1e4c8e-0000-4000-8000-" + fmt.Sprintf("%012d", len(n)), "input": map[string]any{"value": input, "type": "string"},
					"output": map[string]any{"value": input, "type": "string"}, "triggers_replace": nil,
				},
				"sensitive_attributes": []any{},
			}},
		})
	}
	doc := map[string]any{
		"version": 4, "terraform_version": "1.6.0", "serial": serial, "lineage": lineage,
		"outputs": map[string]any{}, "resources": resources, "check_results": nil,
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// chunkSecrets returns name -> (data length, labels, annotations) of the Secrets labelled as a
// state's chunks.
func chunkSecrets(t *testing.T, ns, suffix string) map[string]int {
	t.Helper()
	list, err := testKube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "tfstate=true,tfstateSecretSuffix=" + suffix + ",tfstateWorkspace=default,app.kubernetes.io/managed-by=terraform",
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range list.Items {
		if s.Annotations["encoding"] != "gzip" || s.Type != "Opaque" || len(s.Data) != 1 {
			t.Errorf("chunk %s: annotations %v, type %s, %d data keys; want encoding=gzip, Opaque, 1 key", s.Name, s.Annotations, s.Type, len(s.Data))
		}
		out[s.Name] = len(s.Data["tfstate"])
	}
	return out
}

func TestLayoutRoundTrip(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	extra := map[string]string{LabelResource: "pet"}

	small := stateJSON(t, "lin-1", 1, map[string]int{"a": 100})
	if err := writeStateJSON(ctx, testKube, ns, "default", "pet", extra, small); err != nil {
		t.Fatal(err)
	}
	got, found, err := readStateJSON(ctx, testKube, ns, "default", "pet")
	if err != nil || !found || !bytes.Equal(got, small) {
		t.Fatalf("small state read back: found=%v err=%v equal=%v", found, err, bytes.Equal(got, small))
	}
	if cs := chunkSecrets(t, ns, "pet"); len(cs) != 1 || cs["tfstate-default-pet"] == 0 {
		t.Fatalf("small state chunks = %v, want only tfstate-default-pet", cs)
	}
	s, _ := testKube.CoreV1().Secrets(ns).Get(ctx, "tfstate-default-pet", metav1.GetOptions{})
	if s.Labels[LabelResource] != "pet" {
		t.Errorf("extra label missing: %v", s.Labels)
	}

	// Over 4 MiB gzipped: 6 MiB of base64 text compresses to about 4.5 MiB, 5 chunks.
	big := stateJSON(t, "lin-1", 2, map[string]int{"a": 6 << 20})
	if err := writeStateJSON(ctx, testKube, ns, "default", "pet", extra, big); err != nil {
		t.Fatal(err)
	}
	gz, _ := gzipBytes(big)
	if len(gz) <= 4<<20 {
		t.Fatalf("test state gzips to %d bytes, want over 4 MiB", len(gz))
	}
	cs := chunkSecrets(t, ns, "pet")
	n := (len(gz) + chunkSize - 1) / chunkSize
	if len(cs) != n {
		t.Fatalf("big state: %d chunks %v, want %d", len(cs), cs, n)
	}
	for i := 0; i < n; i++ {
		want := chunkSize
		if i == n-1 {
			want = len(gz) - (n-1)*chunkSize
		}
		if got := cs[chunkName("default", "pet", i)]; got != want {
			t.Errorf("chunk %d holds %d bytes, want %d (names %v)", i, got, want, cs)
		}
	}
	if _, ok := cs["tfstate-default-pet-part-1"]; !ok {
		t.Errorf("no tfstate-default-pet-part-1 among %v", cs)
	}
	got, found, err = readStateJSON(ctx, testKube, ns, "default", "pet")
	if err != nil || !found || !bytes.Equal(got, big) {
		t.Fatalf("big state read back: found=%v err=%v equal=%v", found, err, bytes.Equal(got, big))
	}
	st, found, err := readStatus(ctx, testKube, ns, "default", "pet", nil)
	if err != nil || !found || st.Serial != 2 || st.Lineage != "lin-1" || st.Resources != 1 {
		t.Fatalf("Read of a chunked state = %+v, %v, %v", st, found, err)
	}

	// Back to a small state: the parts go.
	if err := writeStateJSON(ctx, testKube, ns, "default", "pet", extra, small); err != nil {
		t.Fatal(err)
	}
	if cs := chunkSecrets(t, ns, "pet"); len(cs) != 1 {
		t.Fatalf("after shrinking: chunks %v", cs)
	}

	// A chunk missing in the middle is an error, not a state.
	if err := writeStateJSON(ctx, testKube, ns, "default", "pet", extra, big); err != nil {
		t.Fatal(err)
	}
	if err := testKube.CoreV1().Secrets(ns).Delete(ctx, "tfstate-default-pet-part-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readStateJSON(ctx, testKube, ns, "default", "pet"); err == nil || !strings.Contains(err.Error(), "part-2") {
		t.Errorf("read with a missing chunk: %v", err)
	}

	if err := deleteAll(ctx, testKube, ns, "default", "pet"); err != nil {
		t.Fatal(err)
	}
	if cs := chunkSecrets(t, ns, "pet"); len(cs) != 0 {
		t.Fatalf("after Delete: %v", cs)
	}
	if _, found, err := readStateJSON(ctx, testKube, ns, "default", "pet"); found || err != nil {
		t.Fatalf("after Delete: found=%v err=%v", found, err)
	}
}

// kubernetesBackend is a root module with Terraform's kubernetes backend for suffix in ns.
func kubernetesBackend(ns, suffix, body string) string {
	return fmt.Sprintf(`terraform {
  backend "kubernetes" {
    secret_suffix = %q
    namespace     = %q
    config_path   = %q
  }
}
%s`, suffix, ns, testKubeconfig, body)
}

// pulled is what `state pull` printed, decoded.
func pulled(t *testing.T, out string) (serial int64, lineage string, resources []string) {
	t.Helper()
	var doc struct {
		Serial    int64  `json:"serial"`
		Lineage   string `json:"lineage"`
		Resources []struct {
			Type, Name string
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("state pull printed no state: %v\n%.2000s", err, out)
	}
	for _, r := range doc.Resources {
		resources = append(resources, r.Type+"."+r.Name)
	}
	return doc.Serial, doc.Lineage, resources
}

// TestTerraformReadsOurLayout writes a state of over 4 MiB gzipped (5 chunks) with WriteState and
// reads it with the real terraform's kubernetes backend; a small one also with tofu's.
func TestTerraformReadsOurLayout(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	bins := binaries(t)
	big := stateJSON(t, "0d7a3c70-1b7e-4b4e-9c55-1c9e4c0a0001", 7, map[string]int{"big": 6 << 20, "small": 10})
	if err := writeStateJSON(ctx, testKube, ns, "default", "ours", nil, big); err != nil {
		t.Fatal(err)
	}
	dir := writeModule(t, kubernetesBackend(ns, "ours", ""))
	tf := bins[1].path
	mustTF(t, tf, dir, nil, "init", "-input=false")
	list := mustTF(t, tf, dir, nil, "state", "list")
	if !strings.Contains(list, "terraform_data.big") || !strings.Contains(list, "terraform_data.small") {
		t.Fatalf("terraform state list of our chunked state:\n%s", list)
	}
	out := mustTF(t, tf, dir, nil, "state", "pull")
	if serial, lineage, _ := pulled(t, out); serial != 7 || lineage != "0d7a3c70-1b7e-4b4e-9c55-1c9e4c0a0001" {
		t.Fatalf("terraform pulled serial %d lineage %s", serial, lineage)
	}

	small := stateJSON(t, "0d7a3c70-1b7e-4b4e-9c55-1c9e4c0a0002", 3, map[string]int{"only": 10})
	if err := writeStateJSON(ctx, testKube, ns, "default", "single", nil, small); err != nil {
		t.Fatal(err)
	}
	for _, b := range bins {
		dir := writeModule(t, kubernetesBackend(ns, "single", ""))
		mustTF(t, b.path, dir, nil, "init", "-input=false")
		if list := mustTF(t, b.path, dir, nil, "state", "list"); strings.TrimSpace(list) != "terraform_data.only" {
			t.Errorf("%s state list of our single-Secret state: %q", b.name, list)
		}
	}
}

// TestWeReadTerraformLayout has the real terraform write a state of three chunks with its
// kubernetes backend, reads it with ReadState, writes a new version with WriteState, and has
// terraform read that and plan no changes.
func TestWeReadTerraformLayout(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tf := binaries(t)[1].path
	dir := writeModule(t, kubernetesBackend(ns, "theirs", `
resource "random_bytes" "big" {
  length = 1500000
}
resource "terraform_data" "small" {
  input = "hello"
}
`))
	mustTF(t, tf, dir, nil, "init", "-input=false")
	mustTF(t, tf, dir, nil, "apply", "-auto-approve", "-input=false")
	if cs := chunkSecrets(t, ns, "theirs"); len(cs) < 2 {
		t.Fatalf("terraform wrote %v; the test needs a chunked state", cs)
	}
	state, found, err := readStateJSON(ctx, testKube, ns, "default", "theirs")
	if err != nil || !found {
		t.Fatalf("ReadState of terraform's chunked state: found=%v err=%v", found, err)
	}
	serial, lineage, resources := pulled(t, mustTF(t, tf, dir, nil, "state", "pull"))
	st, err := decodeJSON(state)
	if err != nil || st.Serial != serial || st.Lineage != lineage || st.Resources != len(resources) || len(resources) != 2 {
		t.Fatalf("we read %+v (%v); terraform pulls serial %d lineage %s resources %v", st, err, serial, lineage, resources)
	}
	next, err := withSerial(state, serial+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeStateJSON(ctx, testKube, ns, "default", "theirs", nil, next); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := pulled(t, mustTF(t, tf, dir, nil, "state", "pull")); s != serial+1 {
		t.Fatalf("terraform pulls serial %d after our write, want %d", s, serial+1)
	}
	out, err := runTF(t, tf, dir, nil, "plan", "-detailed-exitcode", "-input=false")
	if err != nil {
		t.Fatalf("plan over our write of terraform's state is not clean: %v\n%s", err, out)
	}
}
