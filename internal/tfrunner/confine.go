package tfrunner

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// What a run may do, with Binary.Sandbox set (docs/tenancy.md has the whole table):
//
//	| path                                            | plan, apply, destroy, import, drift | init (shared init, class check) |
//	|-------------------------------------------------|-------------------------------------|---------------------------------|
//	| its own workspace, with its HOME, and its       | read, write, execute                | read, write, execute            |
//	| TMPDIR (Dir/.tmp/<hash>)                        |                                     |                                 |
//	| its shared init (Dir/.modules/<key>)            | read, execute                       | read, write, execute            |
//	| the plugin cache (TF_PLUGIN_CACHE_DIR)          | read, execute                       | read, write, execute            |
//	| the module's source when it is a local path     | read, execute                       | read, execute                   |
//	| sockets of warm providers checked out for it    | connect                             | —                               |
//
// and the sandbox's own base (the system, the binary, the CLI configuration and provider mirror).
// Other workspaces, other shared inits and the warm providers' directory are not granted.

// runDir is the directory, in a workspace, of what belongs to one operation only: its HOME,
// emptied before every command.
const runDir = ".conductor"

// tempDirName is the directory, beside the workspaces, of their TMPDIRs: one per workspace, named
// by a hash of its name, so that the Unix sockets go-plugin makes there stay within the 107 bytes
// of a socket's path whatever the workspace's name (a resource's name runs to 253 characters).
const tempDirName = ".tmp"

// tempDirFor is the TMPDIR of the workspace in dir: Dir/.tmp/<hash of its name>, or where a
// socket's path fits (procs.SocketDir).
func tempDirFor(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Base(dir)))
	return procs.SocketDir(filepath.Join(filepath.Dir(dir), tempDirName, hex.EncodeToString(sum[:6])))
}

// access is what the workspace's commands may do besides the sandbox's base: see the table above.
// connect are directories of warm providers' sockets this command may reach.
func (w *Workspace) access(connect ...string) sandbox.Access {
	a := sandbox.Access{Write: []string{w.dir, w.files.runTemp()}, Read: localSourcePaths(w.spec.Module.Source), Connect: connect}
	cache := w.baseEnv["TF_PLUGIN_CACHE_DIR"]
	if w.initializer {
		a.Write = append(a.Write, cache)
		return a
	}
	a.Trusted = append(a.Trusted, cache)
	if w.shared != nil {
		a.Trusted = append(a.Trusted, w.shared.dir)
	}
	return a
}

// localSourcePaths are the local directories a module source reads from: the path of a local
// source (used in place by Terraform), or the repository or file of a file:// URL (git::file://,
// file://); none for sources fetched over the network. Relative paths are left out (they resolve
// inside the workspace).
func localSourcePaths(source string) []string {
	s := strings.TrimSpace(source)
	if strings.HasPrefix(s, "/") {
		return []string{s}
	}
	if _, rest, ok := strings.Cut(s, "::"); ok {
		s = rest
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "file" || !strings.HasPrefix(u.Path, "/") {
		return nil
	}
	path := u.Path
	if i := strings.Index(path, "//"); i > 0 { // the subdirectory of a package
		path = path[:i]
	}
	return []string{path}
}
