package tfrunner

import (
	"testing"

	"github.com/hashicorp/go-version"
)

// TestInitKeyHoldsTheSourceCredentials: two runs of one module version share an init directory
// only when they fetch it with the same credentials; another class's credentials, or none, get an
// init of their own (a private module is never read through another class's credentials).
// Before, the key was the binary, module and backend only.
func TestInitKeyHoldsTheSourceCredentials(t *testing.T) {
	key := func(c *SourceCredentials) string {
		w := &Workspace{bin: Binary{Path: "/bin/tofu", Version: version.Must(version.NewVersion("1.10.0"))}, spec: Spec{Module: Module{Source: "git::https://git.example/m.git", Version: "v1"}, SourceCredentials: c}}
		k, err := initKey(w.bin, w.spec)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := &SourceCredentials{GitCredentials: []byte("https://a:token-a@git.example\n")}
	sameAsA := &SourceCredentials{GitCredentials: []byte("https://a:token-a@git.example\n")}
	b := &SourceCredentials{GitCredentials: []byte("https://b:token-b@git.example\n")}
	tok := &SourceCredentials{RegistryTokens: map[string]string{"TF_TOKEN_git_example": "token-a"}}
	if key(a) != key(sameAsA) {
		t.Error("the same credentials give two init keys")
	}
	if key(nil) != key(&SourceCredentials{}) {
		t.Error("no credentials and empty credentials give two init keys")
	}
	for name, c := range map[string]*SourceCredentials{"none": nil, "other git credentials": b, "a registry token": tok} {
		if key(c) == key(a) {
			t.Errorf("%s share the init key of class a's credentials", name)
		}
	}
}
