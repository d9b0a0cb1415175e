// Package flagtable builds docs/reference/flags.md: every command-line flag of the manager
// (conductor-tf) and of a runner pool's runner (conductor-tf runner), with its type, its default
// and what it does.
//
// The flags come from the code of cmd/conductor-tf, read with go/ast and go/types (nothing of it
// is compiled or run): every call that defines a flag with package flag (flag.String,
// fs.DurationVar, …), on flag.CommandLine (the manager's flags) or on a set made by
// flag.NewFlagSet("runner", …) (the runner's), also through the command's own helpers that take
// a *flag.FlagSet. The usage is the string the code gives, the default the constant it gives,
// said in words where it is the environment or the machine (value.go). Flags of other packages
// (controller-runtime's logger, which main binds, and --kubeconfig, which controller-runtime
// defines when it is linked) are listed by running their own code on a flag set of flagtable's
// (external.go).
//
// Generate fails, naming the flag, when it cannot say a flag's default or usage, or which
// command a flag belongs to; so a flag added to the code reaches the page or stops `make docs`.
package flagtable

import (
	"flag"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/conductor-tf/conductor-tf/hack/docpage"
)

// Paths, relative to the repository's root.
const (
	// OutputPath is the generated page.
	OutputPath = "docs/reference/flags.md"
	// CommandDir is the command whose flags it lists.
	CommandDir = "cmd/conductor-tf"
	// Command regenerates OutputPath; the page and the check name it.
	Command = "make docs"
)

// Flag is one flag of a command.
type Flag struct {
	// Name is the flag's name, without dashes.
	Name string
	// Type is what --help calls its value: string, duration, int, bool, value.
	Type string
	// Default is the default as Markdown: `10m`, `$POD_NAME`, else the host name; — for empty.
	Default string
	// Usage is the flag's usage string.
	Usage string
	// From names the code outside the command that defines it; empty for the command's own.
	From string
	// Source is where the command defines it (file:line), for messages.
	Source string
}

// Set is the flags of one command line.
type Set struct {
	// Name is the flag set's: CommandLine (""), or the name given to flag.NewFlagSet.
	Name string
	// Command is how it is run: conductor-tf, conductor-tf runner.
	Command string
	// Flags are sorted by name, the command's own first.
	Flags []Flag
}

// Collect reads the flags of the command in dir (relative to root) from its code.
func Collect(root, dir string) ([]Set, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	p, main, err := load(root, dir)
	if err != nil {
		return nil, err
	}
	if main == nil {
		return nil, fmt.Errorf("%s: no Go package", dir)
	}
	f := newFinder(p, main)
	defs, registrations, err := f.sites()
	if err != nil {
		return nil, err
	}
	bySet := map[string][]Flag{}
	for _, s := range defs {
		fl, err := f.flag(s)
		if err != nil {
			return nil, err
		}
		for _, set := range s.sets {
			bySet[set] = append(bySet[set], fl)
		}
	}
	for _, s := range registrations {
		key := f.callee(s.call)
		r, ok := registrars[key]
		if !ok {
			return nil, fmt.Errorf("%s: %s defines flags flagtable does not know: add it to registrars (external.go)", f.pos(s.call), key)
		}
		fs := flag.NewFlagSet(key, flag.ContinueOnError)
		if err := r.bind(f, s, fs); err != nil {
			return nil, err
		}
		for _, set := range s.sets {
			bySet[set] = append(bySet[set], externalFlags(fs, r.from)...)
		}
	}
	if _, ok := bySet[CommandLine]; ok {
		flags, err := p.linkedFlags(dir)
		if err != nil {
			return nil, err
		}
		bySet[CommandLine] = append(bySet[CommandLine], flags...)
	}
	return sets(filepath.Base(dir), bySet)
}

// flag reads one definition.
func (f *finder) flag(s site) (Flag, error) {
	d := definers[s.method]
	fl := Flag{Type: d.typ, Source: f.pos(s.call)}
	var err error
	if fl.Name, err = f.constString(s.call.Args[d.name]); err != nil {
		return fl, fmt.Errorf("%s: the flag's name: %w", fl.Source, err)
	}
	if fl.Usage, err = f.text(s.call.Args[d.usage]); err != nil {
		return fl, fmt.Errorf("%s: the usage of --%s: %w", fl.Source, fl.Name, err)
	}
	fl.Default = "—"
	if d.value >= 0 {
		if fl.Default, err = f.defaultOf(s.call.Args[d.value], d.typ); err != nil {
			return fl, fmt.Errorf("%s: the default of --%s: %w", fl.Source, fl.Name, err)
		}
	}
	// As flag.UnquoteUsage: a `name` in the usage names the value.
	if before, rest, ok := strings.Cut(fl.Usage, "`"); ok {
		if name, after, ok := strings.Cut(rest, "`"); ok {
			fl.Type, fl.Usage = name, before+name+after
		}
	}
	return fl, nil
}

// sets orders the flag sets (the command line first) and their flags, and refuses a name defined
// twice on one set, which would panic when the command starts.
func sets(command string, bySet map[string][]Flag) ([]Set, error) {
	var out []Set
	for name, flags := range bySet {
		sort.SliceStable(flags, func(i, j int) bool {
			if (flags[i].From == "") != (flags[j].From == "") {
				return flags[i].From == ""
			}
			return flags[i].Name < flags[j].Name
		})
		seen := map[string]Flag{}
		for _, fl := range flags {
			if prev, ok := seen[fl.Name]; ok {
				return nil, fmt.Errorf("--%s is defined twice on %s: %s and %s", fl.Name, commandOf(command, name), prev.Source+prev.From, fl.Source+fl.From)
			}
			seen[fl.Name] = fl
		}
		out = append(out, Set{Name: name, Command: commandOf(command, name), Flags: flags})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func commandOf(command, set string) string {
	if set == CommandLine {
		return command
	}
	return command + " " + set
}

// Generate renders the page from the code under root.
func Generate(root string) ([]byte, error) {
	sets, err := Collect(root, CommandDir)
	if err != nil {
		return nil, err
	}
	if err := anchorsUnique(sets); err != nil {
		return nil, err
	}
	return render(sets), nil
}

// ErrStale is wrapped by Check's error when the page differs from what Generate makes.
var ErrStale = docpage.ErrStale

// Check compares the page under root with what Generate makes (docpage.Check).
func Check(root string) error { return docpage.Check(root, OutputPath, Command, Generate) }
