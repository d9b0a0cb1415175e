package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// page is one Markdown file, split into prose and fenced code blocks.
type page struct {
	// rel is the path from the repository's root, with slashes.
	rel string
	// paragraphs are runs of prose lines (not in a code block), joined with "\n".
	paragraphs []paragraph
	blocks     []block
	// anchors are the fragments that lead into the page: headings' ids and <a id> / <a name>.
	anchors map[string]bool
}

type paragraph struct {
	line int // of its first line, from 1
	text string
}

// lineOf is the line of the byte at offset i of the paragraph.
func (p paragraph) lineOf(i int) int { return p.line + strings.Count(p.text[:i], "\n") }

type block struct {
	line int // of the opening fence
	lang string
	text string
	// partial is set by <!-- docs-check: partial --> before the fence.
	partial bool
}

const partialMarker = "<!-- docs-check: partial -->"

var (
	fenceOpen = regexp.MustCompile("^(\\s*)(`{3,}|~{3,})\\s*([A-Za-z0-9_+-]*)")
	heading   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlID    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

func readPage(root, rel string) (*page, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	return parsePage(rel, string(b)), nil
}

// parsePage splits Markdown into prose paragraphs and fenced code blocks (``` or ~~~, indented or
// not, as in list items), and collects its anchors as GitHub makes them.
func parsePage(rel, text string) *page {
	p := &page{rel: rel, anchors: map[string]bool{}}
	lines := strings.Split(text, "\n")
	slugs := map[string]int{}
	var para []string
	paraLine := 0
	lastProse := ""
	flush := func() {
		if len(para) > 0 {
			p.paragraphs = append(p.paragraphs, paragraph{line: paraLine, text: strings.Join(para, "\n")})
		}
		para = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceOpen.FindStringSubmatch(line); m != nil {
			flush()
			indent, fence, lang := m[1], m[2], strings.ToLower(m[3])
			b := block{line: i + 1, lang: lang, partial: strings.TrimSpace(lastProse) == partialMarker}
			var body []string
			for i++; i < len(lines); i++ {
				t := strings.TrimSpace(lines[i])
				if strings.HasPrefix(t, fence[:1]) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
					break
				}
				body = append(body, strings.TrimPrefix(lines[i], indent))
			}
			b.text = strings.Join(body, "\n")
			p.blocks = append(p.blocks, b)
			lastProse = ""
			continue
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		lastProse = line
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if n := slugs[s]; n > 0 {
				p.anchors[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				p.anchors[s] = true
			}
			slugs[s]++
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if len(para) == 0 {
			paraLine = i + 1
		}
		para = append(para, line)
	}
	flush()
	return p
}

var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is the id GitHub gives a heading: the rendered text in lower case, without punctuation
// but hyphens and underscores, spaces turned into hyphens.
func slug(h string) string {
	h = inlineLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	codeSpan = regexp.MustCompile("`+([^`]+)`+")
	// link matches [text](target "title") and ![alt](target); text may hold code spans (blanked
	// first) and line breaks.
	link = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [name]: target
	refDef = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)`)
)

type linkRef struct {
	line   int
	target string
}

// links returns the link targets of the page's prose.
func (p *page) links() []linkRef {
	var out []linkRef
	for _, para := range p.paragraphs {
		// Blank code spans, keeping offsets, so that `[x](y)` in code is not a link.
		text := codeSpan.ReplaceAllStringFunc(para.text, func(s string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return 'x'
			}, s)
		})
		for _, re := range []*regexp.Regexp{link, refDef} {
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				out = append(out, linkRef{line: para.lineOf(m[0]), target: text[m[2]:m[3]]})
			}
		}
	}
	return out
}

type makeRef struct {
	line    int
	targets []string
	text    string
}

var (
	makeCmd = regexp.MustCompile(`^make\s+(.*)$`)
	target  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// shellLangs are the code blocks whose lines are commands.
	shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}
	separator  = regexp.MustCompile(`&&|\|\||;`)
)

// makeTargets returns every `make TARGET…` of the page: in inline code, and as commands in shell
// code blocks (after a "$ " prompt, &&, || or ;).
func (p *page) makeTargets() []makeRef {
	var out []makeRef
	for _, para := range p.paragraphs {
		for _, m := range codeSpan.FindAllStringSubmatchIndex(para.text, -1) {
			span := strings.Join(strings.Fields(para.text[m[2]:m[3]]), " ")
			if t := targetsOf(span); len(t) > 0 {
				out = append(out, makeRef{line: para.lineOf(m[0]), targets: t, text: span})
			}
		}
	}
	for _, b := range p.blocks {
		if !shellLangs[b.lang] {
			continue
		}
		for i, line := range strings.Split(b.text, "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			for _, cmd := range separator.Split(line, -1) {
				cmd = strings.TrimSpace(cmd)
				if t := targetsOf(cmd); len(t) > 0 {
					out = append(out, makeRef{line: b.line + 1 + i, targets: t, text: cmd})
				}
			}
		}
	}
	return out
}

// targetsOf returns the targets of a make command line: the words after make up to the first that
// is neither a target nor a VAR=value.
func targetsOf(cmd string) []string {
	m := makeCmd.FindStringSubmatch(cmd)
	if m == nil {
		return nil
	}
	var out []string
	for _, w := range strings.Fields(m[1]) {
		switch {
		case strings.Contains(w, "="):
			continue
		case target.MatchString(w):
			out = append(out, w)
			continue
		}
		break
	}
	return out
}

// makefileTargets returns the targets the Makefile defines (rule lines "a b: …", not ":=").
func makefileTargets(text string) map[string]bool {
	rule := regexp.MustCompile(`^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*::?(?:[^=]|$)`)
	out := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if m := rule.FindStringSubmatch(line); m != nil {
			for _, t := range strings.Fields(m[1]) {
				if !strings.HasPrefix(t, ".") {
					out[t] = true
				}
			}
		}
	}
	return out
}
