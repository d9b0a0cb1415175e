package tfrunner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
)

// ModuleCache resolves modules for classes: each module address is fetched once (terraform get:
// no backend, no providers, no state) into its own directory under Dir and read with hcl/v2.
// Fetches do not take one of a Pool's slots: they run no provider and write no state.
type ModuleCache struct {
	Binary Binary
	Env    map[string]string
	Dir    string

	mu sync.Mutex
}

// Schema returns the module's declared inputs and outputs, fetching it first when needed with
// creds (nil: none). It returns a *RunError with Terraform's message when the module cannot be
// fetched. A module fetched once is read from the cache by later calls that bring the same creds
// (the directory is keyed by source, version and creds.Fingerprint): a call with other creds or
// none fetches it itself, so a private module is never read through another class's credentials.
func (c *ModuleCache) Schema(ctx context.Context, m Module, creds *SourceCredentials) (*ModuleSchema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := sha256.Sum256([]byte(m.Source + "\x00" + m.Version + "\x00" + creds.Fingerprint()))
	dir := filepath.Join(c.Dir, hex.EncodeToString(sum[:8]))
	if _, err := InstalledModuleDir(dir); err == nil {
		if s, err := (&Workspace{dir: dir}).loadSchema(); err == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	ws, err := NewWorkspace(dir, c.Binary, c.Env, 0)
	if err != nil {
		return nil, err
	}
	if _, err := ws.Prepare(Spec{Module: m, SourceCredentials: creds}); err != nil {
		return nil, err
	}
	tf, done, err := ws.fetchTF()
	if err != nil {
		return nil, err
	}
	err = tf.Get(ctx)
	done()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, classify("get", err)
	}
	return ws.loadSchema()
}
