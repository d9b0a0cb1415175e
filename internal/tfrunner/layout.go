package tfrunner

// A workspace's files, apart from the commands run in it (workspace_runs.go): what Prepare writes
// (the root module, the variables, the credentials a run was granted), what one command gets
// (the ephemeral variables file, a fresh HOME and TMPDIR), and what is removed between operations
// (the credentials and variables, anything a run planted for the manager to follow).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// layout is a workspace directory's files: dir is the workspace, tmp its TMPDIR (tempDirFor). It
// holds no run: each method takes the Spec it writes.
type layout struct{ dir, tmp string }

// runHome and runTemp are the workspace's HOME and TMPDIR.
func (l layout) runHome() string { return filepath.Join(l.dir, runDir, "home") }
func (l layout) runTemp() string { return l.tmp }

// freshRunDirs empties and creates the workspace's HOME and TMPDIR: nothing a command left there
// (a .tofurc, a socket, a planted file) reaches the next.
func (l layout) freshRunDirs() error {
	for _, d := range []string{filepath.Join(l.dir, runDir), l.runTemp()} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	for _, d := range []string{l.runHome(), l.runTemp()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// initKey identifies everything init depends on: binary, module address, backend, and the source
// credentials init fetches with (SourceCredentials.Fingerprint: a class with other credentials or
// none never uses a directory another class's credentials fetched). It is the hex SHA-256 of them;
// the error is RenderRoot's.
func initKey(bin Binary, spec Spec) (string, error) {
	root, err := RenderRoot(RootModule{Module: spec.Module, Backend: spec.Backend})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", bin.Path, bin.Version, spec.SourceCredentials.Fingerprint())
	h.Write(root)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeRoot writes the root module (main.tf, rendered by RenderRoot) of spec: the module call,
// the backend, every variable declared (sensitive and ephemeral ones so marked), and the outputs
// schema lists (none before the first init read it).
func (l layout) writeRoot(spec Spec, schema *ModuleSchema) error {
	r := RootModule{Module: spec.Module, Backend: spec.Backend}
	for name := range spec.Variables {
		r.Variables = append(r.Variables, name)
	}
	for name := range spec.SensitiveVariables {
		r.Variables = append(r.Variables, name)
		r.SensitiveVariables = append(r.SensitiveVariables, name)
	}
	for name := range spec.EphemeralVariables {
		r.Variables = append(r.Variables, name)
		r.EphemeralVariables = append(r.EphemeralVariables, name)
	}
	if schema != nil {
		for _, o := range schema.Outputs {
			r.Outputs = append(r.Outputs, OutputDecl{Name: o.Name, Sensitive: o.Sensitive})
		}
	}
	src, err := RenderRoot(r)
	if err != nil {
		return err
	}
	return wsfs.WriteAtomic(filepath.Join(l.dir, rootFile), src, 0o600)
}

// writeVars writes spec's variables, sensitive ones included, into the variables file (JSON, mode
// 0600); dropCredentials deletes it when the operation ends.
func (l layout) writeVars(spec Spec) error {
	all := make(map[string]any, len(spec.Variables)+len(spec.SensitiveVariables))
	maps.Copy(all, spec.Variables)
	for k, v := range spec.SensitiveVariables {
		all[k] = v
	}
	data, err := json.Marshal(all)
	if err != nil {
		return fmt.Errorf("encoding variables: %w", err)
	}
	return wsfs.WriteAtomic(filepath.Join(l.dir, varsFile), data, 0o600)
}

// writeEphemeralVars writes the spec's ephemeral variables into ephemeralVarsFile (JSON, mode
// 0600) for one command and returns the -var-file option for it — nil when the spec has none —
// and done, which deletes the file and must be called when the command ends. A file a killed
// manager left behind is overwritten by the next command and deleted with the workspace.
func (l layout) writeEphemeralVars(spec Spec) (opt *tfexec.VarFileOption, done func(), err error) {
	done = func() {}
	if len(spec.EphemeralVariables) == 0 {
		return nil, done, nil
	}
	data, err := json.Marshal(spec.EphemeralVariables)
	if err != nil {
		return nil, done, fmt.Errorf("encoding ephemeral variables: %w", err)
	}
	path := filepath.Join(l.dir, ephemeralVarsFile)
	if err := wsfs.WriteAtomic(path, data, 0o600); err != nil {
		return nil, done, err
	}
	return tfexec.VarFile(ephemeralVarsFile), func() { _ = os.Remove(path) }, nil
}

// writeCredentials writes the kubeconfig and cloud identity spec grants into the workspace (mode
// 0600), and removes what an earlier run left of what this one was not granted.
func (l layout) writeCredentials(spec Spec) error {
	if err := l.dropCredentials(); err != nil {
		return err
	}
	if len(spec.Kubeconfig) > 0 {
		if err := wsfs.WriteAtomic(filepath.Join(l.dir, kubeconfigFile), spec.Kubeconfig, 0o600); err != nil {
			return err
		}
	}
	id := spec.Identity
	if id == nil {
		return nil
	}
	token := filepath.Join(l.dir, identityTokenFile)
	if err := wsfs.WriteAtomic(token, id.Token, 0o600); err != nil {
		return err
	}
	if id.Google == nil {
		return nil
	}
	cfg, err := id.Google.credentialConfig(token)
	if err != nil {
		return err
	}
	return wsfs.WriteAtomic(filepath.Join(l.dir, googleCredentialsFile), cfg, 0o600)
}

// dropCredentials deletes the run's granted kubeconfig and cloud identity files and its rendered
// variables (sensitive ones included): the Pool calls it when an operation ends, however it ended;
// the next operation's Prepare writes them again. It returns the errors other than a missing file.
func (l layout) dropCredentials() error {
	var errs []error
	for _, name := range []string{kubeconfigFile, identityTokenFile, googleCredentialsFile, varsFile, ephemeralVarsFile} {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// dropPlanted removes from the workspace's top level what a run may have left there for the
// manager to follow: links (but a .terraform link into the pool's shared inits, which link
// makes), FIFOs, sockets and devices, and wsfs.WriteIn's temporary files a killed manager left. A
// .terraform link elsewhere is removed with the init stamp, so the next run links it again. It
// returns the names it removed; errors: reading the directory or removing an entry.
func (l layout) dropPlanted() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, e := range entries {
		name, t := e.Name(), e.Type()
		switch {
		case t&os.ModeSymlink != 0 && name == ".terraform":
			if target, err := os.Readlink(filepath.Join(l.dir, name)); err == nil && wsfs.IntoSharedInits(l.dir, target) {
				continue
			}
			_ = os.Remove(filepath.Join(l.dir, stampFile))
		case t&os.ModeSymlink != 0, t&(os.ModeNamedPipe|os.ModeSocket|os.ModeDevice|os.ModeCharDevice|os.ModeIrregular) != 0:
		case t.IsRegular() && strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
		default:
			continue
		}
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !os.IsNotExist(err) {
			return dropped, err
		}
		dropped = append(dropped, name)
	}
	return dropped, nil
}
