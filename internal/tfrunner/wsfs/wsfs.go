// Package wsfs is the manager's own reads and writes of files in a run's workspace, its TMPDIR and a shared init's
// directory: places a run (a module, a provider) writes to as well, so a link or a hard link it
// plants there must never lead the unconfined manager to another file. Every such file is opened
// through an os.Root of its directory (no path leaves it, whatever links say: openat with
// RESOLVE_BENEATH's rule), read only when it is a regular file with one link, and written as a new
// file (O_EXCL, a random name) renamed over the name, so a planted link is replaced, never followed.
package wsfs

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

// SharedDirName is the directory, in a Pool's Dir, of the shared initialised directories: runs read
// it (a run sandbox must leave it open to them).
const SharedDirName = ".modules"

// ErrNotRegularFile is returned by ReadIn for a name that is a link, a directory, a device, a
// FIFO or a socket, or a regular file with more than one hard link (it may be another's file).
var ErrNotRegularFile = errors.New("not a regular file with one link")

// MaxFile bounds what the manager reads of a file in a workspace (64 MiB): a state, a
// lock file, a stamp.
const MaxFile = 64 << 20

// WriteAtomic writes data (mode) as path, through WriteIn of its directory.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	return WriteIn(filepath.Dir(path), filepath.Base(path), data, mode)
}

// WriteIn writes data as dir/name with mode: a new file created O_EXCL under a random name in
// dir, then renamed over name, all through an os.Root of dir. Whatever is at name (a file, a link a
// run planted) is replaced, never written through; a stale temporary name cannot be pre-planted.
// Errors: opening dir, creating, writing or renaming the file (the temporary file is removed).
func WriteIn(dir, name string, data []byte, mode os.FileMode) error {
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

// ReadIn reads dir/name through an os.Root of dir (no link leads out of it): a regular file
// with one hard link, at most MaxFile bytes. Errors: the file's absence (os.ErrNotExist),
// ErrNotRegularFile, a file over the bound, and reading errors.
func ReadIn(dir, name string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if fi, err := root.Lstat(name); err != nil {
		return nil, err
	} else if !OneLinkRegular(fi) {
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
	if !OneLinkRegular(fi) { // swapped between the two looks
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), ErrNotRegularFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Join(dir, name), MaxFile)
	}
	return data, nil
}

// OneLinkRegular reports whether fi is a regular file with exactly one hard link.
func OneLinkRegular(fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink == 1
}

// IntoSharedInits reports whether target, the .terraform link of the workspace dir, leads into the
// pool's shared inits (<pool dir>/.modules/, the link tfrunner's shared.go makes) and not out of them.
func IntoSharedInits(dir, target string) bool {
	shared := filepath.Join(filepath.Dir(dir), SharedDirName) + string(filepath.Separator)
	return strings.HasPrefix(target, shared) && !strings.Contains(target[len(shared):], "..")
}

// ReadInit reads name (a path under .terraform: "modules/modules.json") of what init left for
// workDir, through ReadIn: beneath workDir/.terraform when that is a directory, beneath the
// shared init it links to when it is the link tfrunner's shared.go makes. A .terraform link elsewhere (a run
// planted it) is refused with ErrNotRegularFile; other errors are ReadIn's.
func ReadInit(workDir, name string) ([]byte, error) {
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
		if !IntoSharedInits(workDir, target) {
			return nil, fmt.Errorf("%s leads to %s, not into the shared inits: %w", data, target, ErrNotRegularFile)
		}
		data = target
	}
	return ReadIn(data, name)
}
