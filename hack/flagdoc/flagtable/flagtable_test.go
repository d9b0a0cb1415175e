package flagtable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPageIsCurrent: docs/reference/flags.md is what `make docs` makes of cmd/conductor-tf, so a
// flag added, removed or reworded without `make docs` fails `make test` here.
func TestPageIsCurrent(t *testing.T) {
	if err := Check(filepath.Join("..", "..", "..")); err != nil {
		if errors.Is(err, ErrStale) {
			t.Fatalf("%v: the page differs from what the flags of %s make", err, CommandDir)
		}
		t.Fatal(err)
	}
}

// writeModule writes a module example.com/m of files (path → content) into a new directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const defaultsPkg = `package defaults

import "time"

// Interval is a default of another package of the module.
const Interval = 90 * time.Minute
`

func TestCollect(t *testing.T) {
	root := writeModule(t, map[string]string{
		"internal/defaults/defaults.go": defaultsPkg,
		"cmd/tool/main.go": `package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"example.com/m/internal/defaults"
)

var base = []string{"A", "B"}

var shared = "Names besides " + strings.Join(base, ", ") + "."

const sub = "sub"

func main() {
	if len(os.Args) > 1 && os.Args[1] == sub {
		fs := flag.NewFlagSet(sub, flag.ContinueOnError)
		fs.String("pool", os.Getenv("POOL"), "The pool.")
		common(fs)
		_ = fs.Parse(os.Args[2:])
		return
	}
	var every int
	flag.IntVar(&every, "runs", runtime.NumCPU(), "Runs at ` + "`n`" + ` at once.")
	flag.Duration("interval", defaults.Interval, "How often.")
	flag.String("dir", filepath.Join(os.TempDir(), "tool"), "Where.")
	flag.String("pod", envOr("POD_NAME", hostname()), "This pod.")
	common(flag.CommandLine)
	flag.Parse()
}

// common defines the flags both command lines take.
func common(fs *flag.FlagSet) {
	fs.String("env", "", shared)
	fs.Bool("fast", true, "Go fast.")
}

func hostname() string { h, _ := os.Hostname(); return h }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
`,
	})
	sets, err := Collect(root, "cmd/tool")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range sets {
		for _, fl := range s.Flags {
			got[s.Command+" --"+fl.Name] = fl.Type + " | " + fl.Default + " | " + fl.Usage
		}
	}
	want := map[string]string{
		"tool --dir":      "string | `$TMPDIR/tool` | Where.",
		"tool --env":      "string | — | Names besides A, B.",
		"tool --fast":     "bool | `true` | Go fast.",
		"tool --interval": "duration | `1h30m` | How often.",
		"tool --pod":      "string | `$POD_NAME`, else the host name | This pod.",
		"tool --runs":     "n | the number of CPUs | Runs at n at once.",
		"tool sub --env":  "string | — | Names besides A, B.",
		"tool sub --fast": "bool | `true` | Go fast.",
		"tool sub --pool": "string | `$POOL` | The pool.",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected flag %s: %s", k, got[k])
		}
	}
	if len(sets) != 2 || sets[0].Command != "tool" || sets[1].Command != "tool sub" {
		t.Errorf("sets: %+v", sets)
	}
}

// TestCollectRefuses: what the page cannot say from the source stops the generator, naming the
// flag and where it is defined.
func TestCollectRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"a default of the machine": {
			`flag.Int("n", os.Getpid(), "N.")`, "the default of --n: os.Getpid()",
		},
		"a usage made at run time": {
			`flag.String("s", "", fmt.Sprint("S."))`, "the usage of --s",
		},
		"a flag.Value's default": {
			`var v flag.Value; flag.Var(v, "v", "V.")`, "Var has the default its value's String gives",
		},
		"a name defined twice": {
			`flag.Int("n", 1, "N."); flag.Int("n", 2, "N.")`, "--n is defined twice on tool",
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := writeModule(t, map[string]string{"cmd/tool/main.go": `package main

import (
	"flag"
	"fmt"
	"os"
)

var _, _ = fmt.Sprint, os.Getpid

func main() {
	` + tc.body + `
	flag.Parse()
}
`})
			_, err := Collect(root, "cmd/tool")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "main.go:") && !strings.Contains(err.Error(), "defined twice") {
				t.Errorf("the error does not say where: %v", err)
			}
		})
	}
}

// TestRender: one table per command, rows anchored by flag (a runner's prefixed), cells escaped.
func TestRender(t *testing.T) {
	page := string(render([]Set{
		{Name: CommandLine, Command: "tool", Flags: []Flag{{Name: "a", Type: "string", Default: "—", Usage: "The <release>-x | y."}}},
		{Name: "runner", Command: "tool runner", Flags: []Flag{{Name: "a", Type: "int", Default: "`1`", Usage: "A."}}},
	}))
	for _, want := range []string{
		"## tool\n",
		"| <a id=\"a\"></a>`--a` | string | — | The &lt;release>-x \\| y. |\n",
		"## tool runner\n",
		"| <a id=\"runner-a\"></a>`--a` | int | `1` | A. |\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if err := anchorsUnique([]Set{
		{Name: CommandLine, Command: "tool", Flags: []Flag{{Name: "runner-a"}}},
		{Name: "runner", Command: "tool runner", Flags: []Flag{{Name: "a"}}},
	}); err == nil {
		t.Error("two rows of one id were not refused")
	}
}
