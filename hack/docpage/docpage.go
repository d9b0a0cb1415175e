// Package docpage holds what the generated reference pages under docs/reference/ share: the check
// that a page is what its generator makes now, and the escaping of a Markdown table cell.
// hack/reasondoc (conditions.md) and cmd/conductor-tf's flags page test (flags.md) use it.
package docpage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrStale is wrapped by Check's error when a page differs from what its generator makes.
var ErrStale = errors.New("stale")

// Check compares the page at root/path (path slash-separated, relative to the repository root)
// with generate(root). It returns nil when they are equal byte for byte; an error wrapping
// ErrStale that names path and command (what regenerates the page) when they differ or the page
// cannot be read; and generate's error, unchanged, when generating fails.
func Check(root, path, command string, generate func(root string) ([]byte, error)) error {
	want, err := generate(root)
	if err != nil {
		return err
	}
	have, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		return fmt.Errorf("%s is %w: run `%s` (%v)", path, ErrStale, command, err)
	}
	if !bytes.Equal(have, want) {
		return fmt.Errorf("%s is %w: run `%s`", path, ErrStale, command)
	}
	return nil
}

// Cell puts s on one line (runs of white space become one space) and escapes what would end a
// Markdown table cell ("|", everywhere: GitHub's tables split on it even inside a code span) or
// open an HTML tag ("<", outside code spans only: inside one, "&lt;" would be shown as typed).
func Cell(s string) string {
	parts := strings.Split(strings.Join(strings.Fields(s), " "), "`")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = strings.ReplaceAll(parts[i], "<", "&lt;")
	}
	return strings.ReplaceAll(strings.Join(parts, "`"), "|", `\|`)
}
