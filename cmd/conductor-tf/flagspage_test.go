package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/conductor-tf/conductor-tf/hack/flagpage"
)

// updateFlagsPage makes TestFlagsPage write the page instead of comparing it (`make docs`).
var updateFlagsPage = flag.Bool("update-flags-page", false, "write "+flagpage.OutputPath+" from the command's flag sets")

// Two machines that differ in everything a default may read (machine): a default that differs
// between them comes from the machine and is said in words (defaultsInWords), never as the value
// of the machine that made the page.
var (
	bareMachine = machine{getenv: func(string) string { return "" }, hostname: "host-a", tempDir: "/tmp-a", cpus: 3}
	fullMachine = machine{getenv: func(name string) string { return "env-" + name }, hostname: "host-b", tempDir: "/tmp-b", cpus: 5}
)

// defaultsInWords are, by set (flagpage.CommandLine, "runner") and flag, the defaults that come
// from the machine, as the page says them. wordsHold checks each against both machines.
var defaultsInWords = map[string]map[string]string{
	flagpage.CommandLine: {
		"max-concurrent-runs": "the number of CPUs",
		"namespace":           "`$POD_NAMESPACE`, else `conductor-system`",
		"pod-name":            "`$POD_NAME`, else the host name",
		"runner-image":        "`$RUNNER_IMAGE`",
		"service-account":     "`$SERVICE_ACCOUNT_NAME`",
		"work-dir":            "`$TMPDIR/conductor-tf`",
	},
	"runner": {
		"name":     "`$POD_NAME`, else the host name",
		"pool":     "`$RUNNER_POOL`",
		"work-dir": "`$TMPDIR/conductor-tf-runner`",
	},
}

// TestFlagsPage: docs/reference/flags.md is what the command's flag sets say (managerFlags,
// runnerFlags, and controller-runtime's flags the manager parses), walked with VisitAll. With
// -update-flags-page it writes the page (make docs); without, a stale page fails (make test).
func TestFlagsPage(t *testing.T) {
	sets := []flagpage.Set{
		{Name: flagpage.CommandLine, Command: "conductor-tf", Flags: managerRows(t)},
		{Name: "runner", Command: "conductor-tf runner", Flags: runnerRows(t)},
	}
	page, err := flagpage.Render(sets)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", filepath.FromSlash(flagpage.OutputPath))
	if *updateFlagsPage {
		if err := os.WriteFile(path, page, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, page) {
		t.Fatalf("%s is stale: run `%s` (%v)", flagpage.OutputPath, flagpage.Command, err)
	}
}

// managerRows are the manager's rows: its own flags, then --kubeconfig (controller-runtime's
// client configuration defines it on flag.CommandLine when linked), then the logger's. Any other
// flag a linked package defines on flag.CommandLine fails the test: main would parse it, and the
// page would not say it.
func managerRows(t *testing.T) []flagpage.Flag {
	t.Helper()
	bare, full := flag.NewFlagSet("a", flag.ContinueOnError), flag.NewFlagSet("b", flag.ContinueOnError)
	managerFlags(bare, &options{}, bareMachine)
	managerFlags(full, &options{}, fullMachine)
	rows := ownRows(t, flagpage.CommandLine, bare, full)

	client := flag.NewFlagSet("client", flag.ContinueOnError)
	config.RegisterFlags(client)
	logger := flag.NewFlagSet("logger", flag.ContinueOnError)
	opts := loggerOptions()
	opts.BindFlags(logger)
	rows = append(rows, externalRows(client, "controller-runtime's client configuration, linked in (`config.RegisterFlags`)")...)
	rows = append(rows, externalRows(logger, "controller-runtime's logger (`zap.Options.BindFlags`)")...)

	listed := map[string]bool{}
	for _, r := range rows {
		listed[r.Name] = true
	}
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") && f.Name != "update-flags-page" && !listed[f.Name] {
			t.Errorf("--%s is defined on flag.CommandLine by a linked package, and the page does not list it", f.Name)
		}
	})
	return rows
}

// runnerRows are the runner's rows.
func runnerRows(t *testing.T) []flagpage.Flag {
	t.Helper()
	bare, _ := runnerFlags(bareMachine)
	full, _ := runnerFlags(fullMachine)
	return ownRows(t, "runner", bare, full)
}

// ownRows are the rows of a command's own flags, built on the two machines: a default that differs
// between them is said by defaultsInWords[set], which must hold for both; any other is its value.
func ownRows(t *testing.T, set string, bare, full *flag.FlagSet) []flagpage.Flag {
	t.Helper()
	words := defaultsInWords[set]
	var rows []flagpage.Flag
	bare.VisitAll(func(f *flag.Flag) {
		other := full.Lookup(f.Name)
		row := flagpage.Flag{Name: f.Name, Type: typeOf(f), Usage: f.Usage, Default: valueDefault(f)}
		said, inWords := words[f.Name]
		switch {
		case inWords && !wordsHold(said, f.DefValue, other.DefValue):
			t.Errorf("--%s: the page would say its default is %s, but it is %q on one machine and %q on another", f.Name, said, f.DefValue, other.DefValue)
		case inWords:
			row.Default = said
		case f.DefValue != other.DefValue:
			t.Errorf("--%s: its default comes from the machine (%q, %q): say it in defaultsInWords", f.Name, f.DefValue, other.DefValue)
		}
		rows = append(rows, row)
	})
	for name := range words {
		if bare.Lookup(name) == nil {
			t.Errorf("defaultsInWords names --%s, which %q does not define", name, set)
		}
	}
	return rows
}

// wordsHold reports whether said describes the defaults on bareMachine (bare: no environment) and
// fullMachine (full: every variable NAME is "env-NAME"): `$NAME` alone is the variable, `$NAME`,
// else X is X without it, `$TMPDIR/p` the temporary directory joined with p, and "the number of
// CPUs" the machine's.
func wordsHold(said, bare, full string) bool {
	if said == "the number of CPUs" {
		return bare == strconv.Itoa(bareMachine.cpus) && full == strconv.Itoa(fullMachine.cpus)
	}
	if rest, ok := strings.CutPrefix(said, "`$TMPDIR/"); ok {
		p := strings.TrimSuffix(rest, "`")
		return bare == bareMachine.tempDir+"/"+p && full == fullMachine.tempDir+"/"+p
	}
	name, rest, ok := strings.Cut(strings.TrimPrefix(said, "`$"), "`")
	if !ok || full != "env-"+name {
		return false
	}
	switch rest {
	case "":
		return bare == ""
	case ", else the host name":
		return bare == bareMachine.hostname
	default:
		def, ok := strings.CutPrefix(rest, ", else `")
		return ok && bare == strings.TrimSuffix(def, "`")
	}
}

// externalRows are the rows of another package's flags, defaults as that package gives them.
func externalRows(fs *flag.FlagSet, from string) []flagpage.Flag {
	var rows []flagpage.Flag
	fs.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		def := "—"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, flagpage.Flag{Name: f.Name, Type: typeOf(f), Usage: usage, Default: def, From: from})
	})
	return rows
}

// typeOf is what --help calls f's value: bool, string, int, float, duration, or value for any other.
func typeOf(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "bool"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "value"
	}
	switch g.Get().(type) {
	case string:
		return "string"
	case int:
		return "int"
	case float64:
		return "float"
	case time.Duration:
		return "duration"
	}
	return "value"
}

// valueDefault is f's default as the page shows a value: in code, a duration as written (10m, not
// 10m0s), — when empty.
func valueDefault(f *flag.Flag) string {
	v := f.DefValue
	if v == "" {
		return "—"
	}
	if d, err := time.ParseDuration(v); err == nil && typeOf(f) == "duration" {
		v = d.String()
		if strings.HasSuffix(v, "m0s") {
			v = strings.TrimSuffix(v, "0s")
		}
		if strings.HasSuffix(v, "h0m") {
			v = strings.TrimSuffix(v, "0m")
		}
	}
	return "`" + v + "`"
}
