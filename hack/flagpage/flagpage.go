// Package flagpage renders docs/reference/flags.md, the list of every command-line flag of the
// manager (conductor-tf) and of a runner pool's runner (conductor-tf runner), from rows its caller
// reads off the commands' own flag sets (flag.FlagSet.VisitAll in cmd/conductor-tf's
// flagspage_test.go, which `make docs` runs with -update and `make test` runs as a check).
package flagpage

// Paths and names the page gives.
const (
	// OutputPath is the generated page, relative to the repository's root.
	OutputPath = "docs/reference/flags.md"
	// CommandDir is the command whose flags it lists.
	CommandDir = "cmd/conductor-tf"
	// Command regenerates OutputPath; the page and the check name it.
	Command = "make docs"
	// CommandLine is the name of the manager's set (flag.CommandLine's rows); any other Set.Name
	// is a subcommand's (runner).
	CommandLine = ""
)

// Flag is one row.
type Flag struct {
	// Name is the flag's name, without dashes.
	Name string
	// Type is what --help calls its value: string, duration, int, float, bool, value.
	Type string
	// Default is the default as Markdown: `10m`, `$POD_NAME`, else the host name; — for empty.
	Default string
	// Usage is the flag's usage string.
	Usage string
	// From names the code outside the command that defines it; empty for the command's own.
	From string
}

// Set is the flags of one command line.
type Set struct {
	// Name is the set's: CommandLine (""), or the subcommand's (runner).
	Name string
	// Command is how it is run: conductor-tf, conductor-tf runner.
	Command string
	// Flags are the command's own first, sorted by name, then each From group.
	Flags []Flag
}
