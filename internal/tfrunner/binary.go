package tfrunner

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-version"
	install "github.com/hashicorp/hc-install"
	"github.com/hashicorp/hc-install/fs"
	"github.com/hashicorp/hc-install/product"
	"github.com/hashicorp/hc-install/releases"
	"github.com/hashicorp/hc-install/src"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
)

// Flavor tells OpenTofu from Terraform.
type Flavor string

const (
	// OpenTofu is the tofu binary.
	OpenTofu Flavor = "tofu"
	// Terraform is the terraform binary.
	Terraform Flavor = "terraform"
)

// DefaultMinVersion is the oldest CLI version the runner accepts: 1.6 is the first release of both
// OpenTofu and Terraform with the kubernetes backend's Lease locking and import blocks in plans.
var DefaultMinVersion = version.Must(version.NewVersion("1.6.0"))

// Binary is a Terraform or OpenTofu executable.
type Binary struct {
	// Path is the absolute path of the executable.
	Path string
	// Flavor is OpenTofu or Terraform.
	Flavor Flavor
	// Version is what the binary reports with `version -json`.
	Version *version.Version
	// Sandbox, when set, confines every command started with the binary and everything it starts
	// (providers, provisioners): none of them can open the paths it hides (sandbox.Sandbox).
	Sandbox *sandbox.Sandbox
}

func (b Binary) String() string { return fmt.Sprintf("%s %s (%s)", b.Flavor, b.Version, b.Path) }

// tofuProduct describes OpenTofu to hc-install, which knows only HashiCorp products. tofu answers
// `version -json` with the same terraform_version key as Terraform.
var tofuProduct = product.Product{
	Name:       "tofu",
	BinaryName: func() string { return "tofu" },
	GetVersion: product.Terraform.GetVersion,
}

// FindOptions says where FindBinary looks.
type FindOptions struct {
	// ExplicitPath, when set, is the only binary considered (the --terraform-path flag).
	ExplicitPath string
	// MinVersion is the oldest acceptable version; DefaultMinVersion when nil.
	MinVersion *version.Version
	// ExtraPaths are searched after $PATH.
	ExtraPaths []string
	// InstallVersion, when set together with InstallDir, is a Terraform release that hc-install
	// downloads from releases.hashicorp.com when nothing suitable is found (needs the network).
	InstallVersion *version.Version
	// InstallDir receives an installed release.
	InstallDir string
}

// FindBinary returns the binary runs use: opts.ExplicitPath if set; else `tofu`, then `terraform`,
// on $PATH and opts.ExtraPaths at or above the minimum version; else a pinned release installed by
// hc-install when opts.InstallVersion is set. It returns an error that lists every place tried when
// none is suitable.
func FindBinary(ctx context.Context, opts FindOptions) (Binary, error) {
	min := opts.MinVersion
	if min == nil {
		min = DefaultMinVersion
	}
	if opts.ExplicitPath != "" {
		return inspect(ctx, opts.ExplicitPath, min)
	}
	constraint, err := version.NewConstraint(">= " + min.String())
	if err != nil {
		return Binary{}, err
	}
	sources := []src.Source{
		&fs.Version{Product: tofuProduct, Constraints: constraint, ExtraPaths: opts.ExtraPaths},
		&fs.Version{Product: product.Terraform, Constraints: constraint, ExtraPaths: opts.ExtraPaths},
	}
	if opts.InstallVersion != nil && opts.InstallDir != "" {
		sources = append(sources, &releases.ExactVersion{
			Product: product.Terraform, Version: opts.InstallVersion, InstallDir: opts.InstallDir,
		})
	}
	path, err := install.NewInstaller().Ensure(ctx, sources)
	if err != nil {
		return Binary{}, fmt.Errorf("no tofu or terraform >= %s found on PATH or in %v: %w", min, opts.ExtraPaths, err)
	}
	return inspect(ctx, path, min)
}

// FindAll returns every distinct suitable binary among paths (tofu and terraform candidates), in
// the order given, skipping empty, missing or too-old ones. Tests use it to run once per binary.
func FindAll(ctx context.Context, min *version.Version, paths ...string) []Binary {
	if min == nil {
		min = DefaultMinVersion
	}
	var out []Binary
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" {
			continue
		}
		b, err := inspect(ctx, p, min)
		if err != nil || seen[b.Path] {
			continue
		}
		seen[b.Path] = true
		out = append(out, b)
	}
	return out
}

// ErrTooOld is returned (wrapped) by FindBinary for an explicit binary below the minimum version.
var ErrTooOld = errors.New("binary is older than the minimum version")

func inspect(ctx context.Context, path string, min *version.Version) (Binary, error) {
	if !strings.ContainsRune(path, filepath.Separator) {
		found, err := exec.LookPath(path)
		if err != nil {
			return Binary{}, fmt.Errorf("terraform binary %q: %w", path, err)
		}
		path = found
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Binary{}, err
	}
	if abs, err = (&fs.AnyVersion{ExactBinPath: abs}).Find(ctx); err != nil {
		return Binary{}, fmt.Errorf("terraform binary %q: %w", path, err)
	}
	v, err := product.Terraform.GetVersion(ctx, abs)
	if err != nil {
		return Binary{}, fmt.Errorf("reading the version of %q: %w", abs, err)
	}
	if v.LessThan(min) {
		return Binary{}, fmt.Errorf("%s is version %s: %w (%s)", abs, v, ErrTooOld, min)
	}
	flavor := Terraform
	if strings.Contains(filepath.Base(abs), "tofu") {
		flavor = OpenTofu
	}
	return Binary{Path: abs, Flavor: flavor, Version: v}, nil
}
