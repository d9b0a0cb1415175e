package tfrunner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// dirDigest is a SHA-256 over what a shared init holds that runs execute or trust: every file and
// symbolic link under .terraform/modules (module sources: names, modes and contents; links by
// target), the symbolic links and files under .terraform/providers by name, mode and target (their
// contents are Terraform's to check against the lock file, which it does at every command), the
// backend settings (.terraform/terraform.tfstate) and the dependency lock file. 64 hex characters.
// It returns an error only when the directory cannot be walked at all.
func dirDigest(dir string) (string, error) {
	h := sha256.New()
	for _, root := range []string{filepath.Join(".terraform", "modules"), filepath.Join(".terraform", "providers")} {
		contents := root == filepath.Join(".terraform", "modules")
		err := filepath.WalkDir(filepath.Join(dir, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			fmt.Fprintf(h, "%q %v\n", rel, d.Type())
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(path)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "-> %q\n", target)
			case d.Type().IsRegular():
				fi, err := d.Info()
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%v %d\n", fi.Mode(), fi.Size())
				if contents {
					return hashFile(h, path)
				}
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("reading the shared init %s: %w", dir, err)
		}
	}
	for _, f := range []string{lockFile, filepath.Join(".terraform", "terraform.tfstate")} {
		fmt.Fprintf(h, "%q\n", f)
		if err := hashFile(h, filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}
