// Command flagdoc writes docs/reference/flags.md, the list of every command-line flag of the
// manager (conductor-tf) and of a runner pool's runner (conductor-tf runner), from the flag
// definitions in cmd/conductor-tf (package flagtable says how). Run by `make docs`:
//
//	go run ./hack/flagdoc            # write the page
//	go run ./hack/flagdoc -check     # fail when the page is stale
//
// It fails, naming the flag, when it cannot say a flag's default or usage from the code.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conductor-tf/conductor-tf/hack/flagdoc/flagtable"
)

func main() {
	// A flag set of its own: flagtable links controller-runtime, whose init defines --kubeconfig
	// on flag.CommandLine.
	fs := flag.NewFlagSet("flagdoc", flag.ExitOnError)
	root := fs.String("root", ".", "The repository's root.")
	check := fs.Bool("check", false, "Only check that the page is current.")
	_ = fs.Parse(os.Args[1:])
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "flagdoc:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	if check {
		return flagtable.Check(root)
	}
	page, err := flagtable.Generate(root)
	if err != nil {
		return err
	}
	out := filepath.Join(root, flagtable.OutputPath)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, page, 0o644)
}
