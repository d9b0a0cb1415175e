// Command reasondoc writes docs/reference/conditions.md, the table of every condition and event
// reason the controller sets, from the code's reason constants and hack/reasondoc/reasons.yaml
// (package reasontable says how). Run by `make docs`, and by `go generate ./test/docs`:
//
//	go run ./hack/reasondoc            # write the page
//	go run ./hack/reasondoc -check     # fail when the page is stale
//
// It fails, naming them, when a reason of the code has no entry in reasons.yaml or an entry names
// a reason the code no longer has.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/conductor-tf/conductor-tf/hack/reasondoc/reasontable"
)

// main parses the flags (-root, the repository's root, "." by default; -check) and runs; on an
// error it prints it and exits with status 1.
func main() {
	root := flag.String("root", ".", "The repository's root.")
	check := flag.Bool("check", false, "Only check that the page is current.")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "reasondoc:", err)
		os.Exit(1)
	}
}

// run checks the page under root (check), or writes it there (mode 0644, its directory 0755).
func run(root string, check bool) error {
	if check {
		return reasontable.Check(root)
	}
	page, err := reasontable.Generate(root)
	if err != nil {
		return err
	}
	out := filepath.Join(root, reasontable.OutputPath)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, page, 0o644)
}
