package tfrunner

import (
	"fmt"
	"net/url"
	"strings"

	getter "github.com/hashicorp/go-getter/v2"
	goversion "github.com/hashicorp/go-version"
	regaddr "github.com/hashicorp/terraform-registry-address"
)

// SourceKind is how Terraform installs a module source, in the order Terraform's module installer
// tries them (internal/addrs.ParseModuleSource): a local path, a registry address, then a go-getter
// source.
type SourceKind string

// Source kinds.
const (
	// SourceLocal is a path beginning with ./, ../ or /: pinned by the image or volume holding it.
	SourceLocal SourceKind = "local"
	// SourceRegistry is a module registry address, [host/]namespace/name/system[//subdir]; pinned by
	// the module block's version argument (an exact version or a constraint).
	SourceRegistry SourceKind = "registry"
	// SourceGit is a git repository (git::, github.com/…, git@…, bitbucket.org/…); pinned by ?ref=.
	SourceGit SourceKind = "git"
	// SourceMercurial is a Mercurial repository (hg::); pinned by ?rev=.
	SourceMercurial SourceKind = "hg"
	// SourceArchive is an HTTP(S) URL of a module package or archive; pinned only by ?checksum=.
	SourceArchive SourceKind = "archive"
	// SourceBucket is an S3 or GCS object (s3::, gcs::, *.amazonaws.com, storage.googleapis.com);
	// pinned only by ?checksum=.
	SourceBucket SourceKind = "bucket"
)

// PinnedSource is a module source classified and pinned: what RenderRoot writes into the module
// block.
type PinnedSource struct {
	Kind SourceKind
	// Source is the module block's source argument: the class's source, with ?ref= (git) or ?rev=
	// (hg) added from the class's version when the source has none.
	Source string
	// Version is the module block's version argument: set for registry sources only.
	Version string
}

// ParseSource classifies m.Source with the libraries that define source addresses
// (terraform-registry-address for registry addresses, go-getter's detectors for the rest) and
// pins it with m.Version. It returns an error, with the reason and how to pin, when:
//   - a registry source has no version, or a version that is neither a version nor a constraint;
//   - a git or hg source has neither a version nor a ref/rev, or both and they disagree;
//   - an archive or bucket source has no ?checksum= (the same URL can serve other content later,
//     so a version alone would not pin it);
//   - no getter recognises the source.
func ParseSource(m Module) (PinnedSource, error) {
	s := strings.TrimSpace(m.Source)
	if s == "" {
		return PinnedSource{}, fmt.Errorf("module source is empty")
	}
	if strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "/") {
		return PinnedSource{Kind: SourceLocal, Source: s}, nil
	}
	if !strings.Contains(s, "::") && !strings.Contains(s, "://") {
		if addr, err := regaddr.ParseModuleSource(s); err == nil {
			return pinRegistry(s, &addr, m.Version)
		}
	}
	if isBucket(s) {
		return pinByChecksum(SourceBucket, s, m.Version)
	}
	kind, detected, err := detect(s)
	if err != nil {
		return PinnedSource{}, err
	}
	switch kind {
	case SourceGit:
		return pinRef(kind, s, detected, "ref", m.Version)
	case SourceMercurial:
		return pinRef(kind, s, detected, "rev", m.Version)
	case SourceLocal:
		return PinnedSource{Kind: SourceLocal, Source: s}, nil
	default:
		return pinByChecksum(kind, s, m.Version)
	}
}

// ResolveSource returns the module block's source and version arguments for m: ParseSource's
// Source and Version, with its errors.
func ResolveSource(m Module) (source, version string, err error) {
	p, err := ParseSource(m)
	return p.Source, p.Version, err
}

func pinRegistry(s string, addr *regaddr.Module, version string) (PinnedSource, error) {
	if version == "" {
		return PinnedSource{}, fmt.Errorf("registry module %s has no version: set the class's version to an exact version (1.2.0) or a constraint (~> 1.2)", addr.ForDisplay())
	}
	if _, err := goversion.NewConstraint(version); err != nil {
		return PinnedSource{}, fmt.Errorf("registry module %s: version %q is neither a version nor a version constraint: %v", addr.ForDisplay(), version, err)
	}
	return PinnedSource{Kind: SourceRegistry, Source: s, Version: version}, nil
}

// sourceGetters are go-getter's getters in go-getter's order, with the detectors Terraform's module
// installer uses: no BitBucket detector (it asks bitbucket.org's API whether a repository is git or
// hg; write git::https://bitbucket.org/… instead) and no SMB getters (not module sources).
var sourceGetters = []getter.Getter{
	&getter.GitGetter{Detectors: []getter.Detector{new(getter.GitHubDetector), new(getter.GitDetector), new(getter.GitLabDetector)}},
	new(getter.HgGetter),
	new(getter.HttpGetter),
	new(getter.FileGetter),
}

// detect runs sourceGetters over s; detected is the URL the matching getter would fetch
// (shorthands such as github.com/org/repo expanded). Without a working directory, a relative path
// matches nothing, as in Terraform, where local paths must begin with ./ or ../.
func detect(s string) (SourceKind, *url.URL, error) {
	for _, g := range sourceGetters {
		req := &getter.Request{Src: s}
		ok, err := getter.Detect(req, g)
		if _, file := g.(*getter.FileGetter); err != nil && file {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("module source %q: %w", s, err)
		}
		if !ok {
			continue
		}
		u, err := url.Parse(req.Src)
		if err != nil {
			return "", nil, fmt.Errorf("module source %q: %w", s, err)
		}
		switch g.(type) {
		case *getter.GitGetter:
			return SourceGit, u, nil
		case *getter.HgGetter:
			return SourceMercurial, u, nil
		case *getter.HttpGetter:
			return SourceArchive, u, nil
		case *getter.FileGetter:
			return SourceLocal, u, nil
		default:
			return "", nil, fmt.Errorf("module source %q: %T sources are not supported", s, g)
		}
	}
	return "", nil, fmt.Errorf("module source %q is neither a local path, a registry address nor a source go-getter recognises", s)
}

// pinRef pins a version-control source by its ref (git) or rev (hg) argument: the class's version
// becomes the argument when the source has none; a source that has one must agree with the version.
func pinRef(kind SourceKind, s string, detected *url.URL, arg, version string) (PinnedSource, error) {
	have := detected.Query().Get(arg)
	switch {
	case have == "" && version == "":
		return PinnedSource{}, fmt.Errorf("%s module source %q has no version and no ?%s= to pin it", kind, s, arg)
	case have != "" && version != "" && have != version:
		return PinnedSource{}, fmt.Errorf("%s module source %q pins ?%s=%s but the class's version is %q: give the version in one place", kind, s, arg, have, version)
	case have != "":
		return PinnedSource{Kind: kind, Source: s}, nil
	}
	pinned, err := withArg(s, arg, version)
	return PinnedSource{Kind: kind, Source: pinned}, err
}

// pinByChecksum accepts an archive or bucket source only with a checksum argument, which go-getter
// verifies against the downloaded file before unpacking it.
func pinByChecksum(kind SourceKind, s, version string) (PinnedSource, error) {
	u, err := url.Parse(strings.TrimPrefix(strings.TrimPrefix(s, "s3::"), "gcs::"))
	if err != nil {
		return PinnedSource{}, fmt.Errorf("module source %q: %w", s, err)
	}
	if u.Query().Get("checksum") == "" {
		pin := "a version"
		if version != "" {
			pin = fmt.Sprintf("version %q", version)
		}
		return PinnedSource{}, fmt.Errorf("%s module source %q is not pinned: the same URL can serve other content later and %s does not change that; add ?checksum=sha256:<digest of the archive> (checked at download), or publish the module to a registry or a git tag", kind, s, pin)
	}
	return PinnedSource{Kind: kind, Source: s}, nil
}

// isBucket reports an S3 or GCS source, forced (s3::, gcs::) or by host, as Terraform's module
// installer detects them. go-getter v2 keeps these getters in modules of their own (with the cloud
// SDKs), so they are recognised here by the forms Terraform documents.
func isBucket(s string) bool {
	if strings.HasPrefix(s, "s3::") || strings.HasPrefix(s, "gcs::") {
		return true
	}
	host := s
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	return strings.HasSuffix(host, ".amazonaws.com") || host == "storage.googleapis.com" ||
		(host == "www.googleapis.com" && strings.Contains(s, "/storage/"))
}

// withArg adds ?<arg>=<value> to the URL part of a source, before any //subdir, keeping the rest
// of the query.
func withArg(s, arg, value string) (string, error) {
	base, sub := s, ""
	// The subdirectory separator is the first "//" after the scheme's "://".
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + 3
	}
	if i := strings.Index(s[start:], "//"); i >= 0 {
		base, sub = s[:start+i], s[start+i:]
	}
	query := ""
	if i := strings.Index(sub, "?"); i >= 0 {
		sub, query = sub[:i], sub[i+1:]
	} else if i := strings.Index(base, "?"); i >= 0 {
		base, query = base[:i], base[i+1:]
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", fmt.Errorf("module source %q: %w", s, err)
	}
	values.Set(arg, value)
	return base + sub + "?" + values.Encode(), nil
}
