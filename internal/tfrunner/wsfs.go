package tfrunner

// The manager's own reads and writes of files in a run's workspace, its TMPDIR and a shared init's
// directory: places a run (a module, a provider) writes to as well, so a link or a hard link it
// plants there must never lead the unconfined manager to another file. Every such file is opened
// through an os.Root of its directory (no path leaves it, whatever links say: openat with
// RESOLVE_BENEATH's rule), read only when it is a regular file with one link, and written as a new
// file (O_EXCL, a random name) renamed over the name, so a planted link is replaced, never followed.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotRegularFile is returned by readFileIn for a name that is a link, a directory, a device, a
// FIFO or a socket, or a regular file with more than one hard link (it may be another's file).
var ErrNotRegularFile = errors.New("not a regular file with one link")

// maxWorkspaceFile bounds what the manager reads of a file in a workspace (64 MiB): a state, a
// lock file, a stamp.
const maxWorkspaceFile = 64 << 20

// writeFileAtomic writes data (mode) as path, through writeFileIn of its directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	return writeFileIn(filepath.Dir(path), filepath.Base(path), data, mode)
}

// writeFileIn writes data as dir/name with mode: a new file created O_EXCL under a random name in
// dir, then renamed over name, all through an os.Root of dir. Whatever is at name (a file, a link a
// run planted) is replaced, never written through; a stale temporary name cannot be pre-planted.
// Errors: opening dir, creating, writing or renaming the file (the temporary file is removed).
func writeFileIn(dir, name string, data []byte, mode os.FileMode) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := "." + name + "." + hex.EncodeToString(suffix[:]) + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, name)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), werr)
	}
	return nil
}

// readFileIn reads dir/name through an os.Root of dir (no link leads out of it): a regular file
// with one hard link, at most maxWorkspaceFile bytes. Errors: the file's absence (os.ErrNotExist),
// ErrNotRegularFile, a file over the bound, and reading errors.
func readFileIn(dir, name string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err != nil {
		return nil, err
	} else if !oneLinkRegular(fi) {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), ErrNotRegularFile)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !oneLinkRegular(fi) { // swapped between the two looks
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), ErrNotRegularFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWorkspaceFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxWorkspaceFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Join(dir, name), maxWorkspaceFile)
	}
	return data, nil
}

// oneLinkRegular reports whether fi is a regular file with exactly one hard link.
func oneLinkRegular(fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink == 1
}

// dropPlanted removes from the workspace's top level what a run may have left there for the
// manager to follow: links (but a .terraform link into the pool's shared inits, which link
// makes), FIFOs, sockets and devices, and writeFileIn's temporary files a killed manager left. A
// .terraform link elsewhere is removed with the init stamp, so the next run links it again. It
// returns the names it removed; errors: reading the directory or removing an entry.
func (w *Workspace) dropPlanted() ([]string, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, e := range entries {
		name, t := e.Name(), e.Type()
		switch {
		case t&os.ModeSymlink != 0 && name == ".terraform":
			if target, err := os.Readlink(filepath.Join(w.dir, name)); err == nil && intoSharedInits(w.dir, target) {
				continue
			}
			_ = os.Remove(filepath.Join(w.dir, stampFile))
		case t&os.ModeSymlink != 0, t&(os.ModeNamedPipe|os.ModeSocket|os.ModeDevice|os.ModeCharDevice|os.ModeIrregular) != 0:
		case t.IsRegular() && strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp"):
		default:
			continue
		}
		if err := os.Remove(filepath.Join(w.dir, name)); err != nil && !os.IsNotExist(err) {
			return dropped, err
		}
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// intoSharedInits reports whether target, the .terraform link of the workspace dir, leads into the
// pool's shared inits (<pool dir>/.modules/, the link shared.go makes) and not out of them.
func intoSharedInits(dir, target string) bool {
	shared := filepath.Join(filepath.Dir(dir), SharedDirName) + string(filepath.Separator)
	return strings.HasPrefix(target, shared) && !strings.Contains(target[len(shared):], "..")
}

// readInitFile reads name (a path under .terraform: "modules/modules.json") of what init left for
// workDir, through readFileIn: beneath workDir/.terraform when that is a directory, beneath the
// shared init it links to when it is the link shared.go makes. A .terraform link elsewhere (a run
// planted it) is refused with ErrNotRegularFile; other errors are readFileIn's.
func readInitFile(workDir, name string) ([]byte, error) {
	data := filepath.Join(workDir, ".terraform")
	fi, err := os.Lstat(data)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(data)
		if err != nil {
			return nil, err
		}
		if !intoSharedInits(workDir, target) {
			return nil, fmt.Errorf("%s leads to %s, not into the shared inits: %w", data, target, ErrNotRegularFile)
		}
		data = target
	}
	return readFileIn(data, name)
}
