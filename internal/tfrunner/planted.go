package tfrunner

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// dropPlanted removes from the workspace's top level what a run may have left there for the
// manager to follow: links (but a .terraform link into the pool's shared inits, which link
// makes), FIFOs, sockets and devices, and wsfs.WriteIn's temporary files a killed manager left. A
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
			if target, err := os.Readlink(filepath.Join(w.dir, name)); err == nil && wsfs.IntoSharedInits(w.dir, target) {
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
