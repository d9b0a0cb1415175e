package docpage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	page := []byte("| a | b |\n")
	gen := func(string) ([]byte, error) { return page, nil }
	if err := Check(root, "docs/page.md", "make docs", gen); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "docs/page.md") {
		t.Fatalf("missing page: got %v, want ErrStale naming the page", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "page.md"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(root, "docs/page.md", "make docs", gen); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "make docs") {
		t.Fatalf("different page: got %v, want ErrStale naming the command", err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "page.md"), page, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(root, "docs/page.md", "make docs", gen); err != nil {
		t.Fatalf("same page: got %v", err)
	}
	boom := errors.New("boom")
	if err := Check(root, "docs/page.md", "make docs", func(string) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) || errors.Is(err, ErrStale) {
		t.Fatalf("failing generator: got %v, want its own error", err)
	}
}

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"a  b\n c":                    "a b c",
		"x | y":                       `x \| y`,
		"<ns>/<name>":                 "&lt;ns>/&lt;name>",
		"`TF_TOKEN_<host>` or <host>": "`TF_TOKEN_<host>` or &lt;host>",
		"`a|b`":                       "`a\\|b`",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}
