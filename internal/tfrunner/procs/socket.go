package procs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
)

// maxSocketPath is the longest path a Unix socket may have (sun_path holds 108 bytes with the NUL).
const maxSocketPath = 107

// SocketDir returns dir when a go-plugin socket in it (plugin<10 digits>) fits maxSocketPath, else
// a directory in the system's temporary directory named by a hash of dir (a deep work directory,
// as tests make): the sandbox grants either only to whom it grants dir.
func SocketDir(dir string) string {
	if len(dir)+len("/plugin0123456789") <= maxSocketPath {
		return dir
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "conductor-tf-"+hex.EncodeToString(sum[:8]))
}
