package main

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// templater turns an object into a Helm template: the object is marshalled to YAML with markers
// where template text goes, literal "{{" is escaped, then each marker is replaced. An expression
// marker stands for a value inside a line; a block marker (a map key or a list item of its own)
// stands for whole lines, indented as the marker's line is.
type templater struct {
	exprs  map[string]string
	blocks map[string]func(indent string) string
}

func newTemplater() *templater {
	return &templater{exprs: map[string]string{}, blocks: map[string]func(string) string{}}
}

// expr returns the marker of a value whose text is the template expression e (e.g. "{{ .Values.x }}").
func (t *templater) expr(e string) string {
	m := fmt.Sprintf("__HELMEXPR_%d__", len(t.exprs))
	t.exprs[m] = e
	return m
}

// block returns the marker of lines: text's lines, each prefixed with the marker line's indent; the
// word IND in text is the indent's width and IND2 that width plus two (for toYaml | nindent). As a
// map key the marker sorts after the map's other keys (zz_), so it never begins a list item's map.
func (t *templater) block(text string) string {
	m := fmt.Sprintf("zz_HELMBLOCK_%d__", len(t.blocks))
	t.blocks[m] = func(indent string) string {
		n := len(indent)
		text := strings.NewReplacer("IND2", fmt.Sprint(n+2), "IND", fmt.Sprint(n)).Replace(strings.TrimSuffix(text, "\n"))
		lines := strings.Split(text, "\n")
		for i := range lines {
			lines[i] = indent + lines[i]
		}
		return strings.Join(lines, "\n")
	}
	return m
}

var markerLine = regexp.MustCompile(`^( *)(- )?.*(zz_HELMBLOCK_\d+__)`)

// render marshals o and replaces its markers.
func (t *templater) render(o object) string {
	raw, err := yaml.Marshal(o)
	if err != nil {
		panic(err) // o was decoded from YAML: it marshals back
	}
	text := strings.ReplaceAll(string(raw), "{{", `{{ "{{" }}`)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if m := markerLine.FindStringSubmatch(l); m != nil {
			lines[i] = t.blocks[m[3]](m[1])
		}
	}
	text = strings.Join(lines, "\n")
	for m, e := range t.exprs {
		text = strings.ReplaceAll(text, m, e)
	}
	return text
}

// Template text of the chart's helpers (templates/_helpers.tpl).
const (
	fullname = `{{ include "conductor-tf.fullname" . }}`
	labels   = `{{- include "conductor-tf.labels" . | nindent IND }}`
)

// gated wraps body in a condition on a value (e.g. "rbac.enable").
func gated(value, body string) string {
	return fmt.Sprintf("{{- if .Values.%s }}\n%s{{- end }}\n", value, body)
}

// meta templates an object's metadata: the config's namespace becomes the release's, the config's
// name prefix the release's full name, and the chart's labels replace app.kubernetes.io/name and
// managed-by.
func (t *templater) meta(o object) {
	md, _ := o["metadata"].(map[string]any)
	if md == nil {
		return
	}
	if md["namespace"] == configNamespace {
		md["namespace"] = t.expr("{{ .Release.Namespace }}")
	}
	md["name"] = t.name(str(o, "metadata", "name"))
	ls, _ := md["labels"].(map[string]any)
	if ls == nil {
		ls = map[string]any{}
	}
	delete(ls, "app.kubernetes.io/name")
	delete(ls, "app.kubernetes.io/managed-by")
	ls[t.block(labels)] = ""
	md["labels"] = ls
}

// name templates a name with the config's prefix; other names are kept.
func (t *templater) name(n string) string {
	if rest, ok := strings.CutPrefix(n, configPrefix); ok {
		return t.expr(fullname + "-" + rest)
	}
	return n
}

// objectTemplate templates an RBAC object or Service: metadata, plus the names and namespaces its
// roleRef and subjects refer to.
func objectTemplate(o object) string {
	t := newTemplater()
	metrics := isMetricsService(o) // before meta templates the name
	t.meta(o)
	if ref, ok := o["roleRef"].(map[string]any); ok {
		ref["name"] = t.name(str(ref, "name"))
	}
	subjects, _ := o["subjects"].([]any)
	for _, s := range subjects {
		if s, ok := s.(map[string]any); ok {
			s["name"] = t.name(str(s, "name"))
			if s["namespace"] == configNamespace {
				s["namespace"] = t.expr("{{ .Release.Namespace }}")
			}
		}
	}
	if metrics {
		ports, _ := get(o, "spec", "ports").([]any)
		for _, p := range ports {
			if p, ok := p.(map[string]any); ok {
				p["port"] = t.expr("{{ .Values.metrics.port }}")
				p["targetPort"] = t.expr("{{ .Values.metrics.port }}")
			}
		}
	}
	return t.render(o)
}

// isMetricsService reports the metrics Service (config/default), whose port is metrics.port; other
// Services keep their ports.
func isMetricsService(o object) bool {
	return str(o, "kind") == "Service" && strings.Contains(str(o, "metadata", "name"), "metrics")
}

// crdTemplate templates a CustomResourceDefinition, installed while crd.enable and kept by
// `helm uninstall` while crd.keep (deleting a CRD deletes every claim, class and resource).
func crdTemplate(o object) string {
	t := newTemplater()
	t.meta(o)
	md := o["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[t.block("{{- if .Values.crd.keep }}\nhelm.sh/resource-policy: keep\n{{- end }}")] = ""
	md["annotations"] = ann
	return gated("crd.enable", t.render(o))
}
