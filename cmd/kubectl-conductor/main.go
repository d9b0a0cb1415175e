// Command kubectl-conductor is the kubectl plugin of conductor-tf: `kubectl conductor plan|approve|
// runs|logs|unlock|restore-state|inputs|tree`. kubectl runs it as a plugin when the binary is on PATH.
// It reads what the controller reports in status (pending plans, runs, the state and its lock) and
// acts only through what the controller offers: annotations it carries out, and the release of a
// lock it reports as stale.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := NewRootCommand(streams).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
