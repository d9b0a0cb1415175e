// Package docs checks the project's documentation, README.md and docs/**/*.md, with plain `go test`
// (it is run by `make test`):
//
//   - every relative link resolves to a file or directory of the repository, and a #fragment to a
//     heading or an <a id> of the Markdown page it names;
//   - every `make TARGET` named in inline code or a code block is a target of the Makefile;
//   - every ```yaml block parses (all its documents, duplicate keys refused), and every object of
//     apiVersion conductor.io/… in it validates against the CRDs in config/crd/bases as the API
//     server would: OpenAPI schema, unknown fields, CEL rules and object metadata. A block marked
//     <!-- docs-check: partial --> on the line before it (blank lines between are allowed) is
//     parsed but not validated, for fragments of a spec;
//   - every page under docs/ is listed in docs/README.md;
//   - docs/reference/conditions.md is what `make docs` makes of the code (hack/reasondoc), so a
//     reason constant added without its entry in hack/reasondoc/reasons.yaml fails here.
package docs

//go:generate go run ../../hack/reasondoc -root ../..
