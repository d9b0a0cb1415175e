package warm

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// lockedHashes returns the hashes the dependency lock file at path records for the provider
// address (host/namespace/type), as written there ("h1:…", "zh:…"). It returns an error when the
// file cannot be read or parsed, or does not name the provider.
func lockedHashes(path, address string) ([]string, error) {
	data, err := wsfs.ReadIn(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return nil, err
	}
	file, diags := hclsyntax.ParseConfig(data, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("reading %s: %s", path, diags.Error())
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return nil, fmt.Errorf("reading %s: not native syntax", path)
	}
	for _, b := range body.Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 || b.Labels[0] != address {
			continue
		}
		attr, ok := b.Body.Attributes["hashes"]
		if !ok {
			return nil, nil
		}
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || !v.CanIterateElements() {
			return nil, fmt.Errorf("reading %s: the hashes of %s are not a list of strings", path, address)
		}
		var out []string
		for it := v.ElementIterator(); it.Next(); {
			_, h := it.Element()
			if h.IsKnown() && !h.IsNull() && h.Type() == cty.String {
				out = append(out, h.AsString())
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s does not lock provider %s", path, address)
}

// checkProviderPackage checks the package directory of p (the directory of its binary, links
// resolved) against the h1 hashes lock records for it: Terraform's package hash scheme 1, which
// is Go's dirhash.Hash1 over the unpacked package (hashicorp/terraform internal/getproviders,
// PackageHashV1). It returns an error, naming the provider, when the lock file records no h1 hash
// for it or none matches: the binary changed after init and is not started.
func checkProviderPackage(lock string, p Binary) error {
	hashes, err := lockedHashes(lock, p.Address)
	if err != nil {
		return fmt.Errorf("warm provider %s: %w", p.Address, err)
	}
	dir := filepath.Dir(p.Path)
	got, err := dirhash.HashDir(dir, "", dirhash.Hash1)
	if err != nil {
		return fmt.Errorf("warm provider %s: hashing %s: %w", p.Address, dir, err)
	}
	if !slices.Contains(hashes, got) {
		return fmt.Errorf("warm provider %s: the package in %s (%s) matches no h1 hash of %s: not started", p.Address, dir, got, lock)
	}
	return nil
}
