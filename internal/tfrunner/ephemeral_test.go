package tfrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A module's ephemeral variables are read from its HCL and JSON files; the root module declares a
// generated password's variable ephemeral and sensitive; a run refuses to pass one to a variable
// the module does not declare ephemeral.
func TestEphemeralVariables(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("variables.tf", `
variable "password" {
  type      = string
  ephemeral = true
}
variable "password_version" { type = number }
variable "plain" {
  type      = string
  ephemeral = false
}`)
	write("more.tf.json", `{"variable": {"token": {"type": "string", "ephemeral": true}}}`)
	write("notes.txt", `variable "ignored" { ephemeral = true }`)

	schema, err := LoadModuleSchema(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, in := range schema.Inputs {
		got[in.Name] = in.Ephemeral
	}
	want := map[string]bool{"password": true, "password_version": false, "plain": false, "token": true}
	for name, eph := range want {
		if g, ok := got[name]; !ok || g != eph {
			t.Errorf("input %s: ephemeral %v (declared %v), want %v", name, g, ok, eph)
		}
	}
	if len(got) != len(want) {
		t.Errorf("inputs %v, want %v", got, want)
	}

	spec := Spec{Variables: map[string]any{"password_version": 1, "plain": "x"}, EphemeralVariables: map[string]string{"password": "s3cret", "token": "t"}}
	if err := CheckInputs(spec, schema); err != nil {
		t.Errorf("ephemeral variables to ephemeral inputs: %v", err)
	}
	spec = Spec{Variables: map[string]any{"password_version": 1}, EphemeralVariables: map[string]string{"password": "s3cret", "token": "t", "plain": "x"}}
	err = CheckInputs(spec, schema)
	if err == nil || !strings.Contains(err.Error(), `variable "plain" gets a generated password but the module does not declare it ephemeral = true`) {
		t.Errorf("a password for a variable that is not ephemeral: %v", err)
	}

	write("bad.tf", `variable "odd" { ephemeral = "yes" }`)
	if _, err := LoadModuleSchema(dir); err == nil || !strings.Contains(err.Error(), `variable "odd": ephemeral must be true or false`) {
		t.Errorf("a non-bool ephemeral: %v", err)
	}
}

func TestRenderRootEphemeral(t *testing.T) {
	src, err := RenderRoot(RootModule{Module: Module{Source: "./m"}, Variables: []string{"name", "password"},
		EphemeralVariables: []string{"password"}})
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, want := range []string{"variable \"password\" {\n  sensitive = true\n  ephemeral = true\n}", "variable \"name\" {\n}", "password = var.password"} {
		if !strings.Contains(text, want) {
			t.Errorf("root module lacks %q:\n%s", want, text)
		}
	}
}
