// Command helmchart writes the Helm chart dist/chart from the objects config/ renders to, laid out
// as kubebuilder's helm plugin lays a chart out (templates/crd, templates/rbac, templates/manager,
// templates/metrics; values for the manager, rbac, crd and metrics), and the dashboard and alerts of
// config/monitoring (templates/monitoring, files/; values monitoring.*). Run by `make helm-chart`:
//
//	hack/kustomize.sh conductor-tf/controller:dev | go run ./hack/helmchart -out dist/chart
//
// It reads the multi-document YAML of `kustomize build config/default` on standard input and
// replaces the directory -out. Every object but the Namespace becomes a template: the namespace
// conductor-system becomes the release's, the name prefix conductor-tf- becomes the release's
// full name, and the Deployment's image, replicas, resources, arguments, environment, scheduling
// and provider mirror come from values. values.yaml takes its defaults from the Deployment, so
// `helm template conductor-tf dist/chart -n conductor-system` renders what dist/install.yaml
// holds. It fails on input without exactly one Deployment.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The names config/default gives the objects it renders (its namespace and namePrefix).
const (
	configNamespace = "conductor-system"
	configPrefix    = "conductor-tf-"
)

// object is one rendered Kubernetes object, as YAML decodes it.
type object = map[string]any

func main() {
	out := flag.String("out", "dist/chart", "Directory to write the chart to (replaced).")
	version := flag.String("chart-version", "0.1.0", "The chart's version (Chart.yaml).")
	flag.Parse()
	objs, err := decode(os.Stdin)
	if err == nil {
		var files map[string]string
		if files, err = chart(objs, *version); err == nil {
			err = write(*out, files)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmchart:", err)
		os.Exit(1)
	}
}

// decode reads every object of a multi-document YAML stream, skipping empty documents.
func decode(r io.Reader) ([]object, error) {
	var objs []object
	dec := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return nil, err
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
}

// chart returns the chart's files, by path relative to the chart's directory.
func chart(objs []object, version string) (map[string]string, error) {
	files := map[string]string{}
	var deploy object
	for _, o := range objs {
		kind, name := str(o, "kind"), str(o, "metadata", "name")
		base := strings.TrimPrefix(name, configPrefix)
		file := base + ".yaml"
		for _, dir := range []string{"crd", "rbac", "metrics", "runners"} {
			if _, taken := files["templates/"+dir+"/"+file]; taken {
				// A Role named as a ClusterRole (controller-gen's manager-role): the kind tells them apart.
				file = base + "-" + strings.ToLower(kind) + ".yaml"
			}
		}
		switch kind {
		case "Namespace":
			// Helm installs into the release's namespace (helm install --create-namespace).
		case "CustomResourceDefinition":
			files["templates/crd/"+file] = crdTemplate(o)
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			files["templates/rbac/"+file] = gated("rbac.enable", objectTemplate(o))
		case "Service":
			if !isMetricsService(o) {
				// The Service runner pools connect through: always installed.
				files["templates/runners/"+file] = objectTemplate(o)
				break
			}
			files["templates/metrics/"+file] = gated("metrics.enable", objectTemplate(o))
		case "Deployment":
			if deploy != nil {
				return nil, errors.New("more than one Deployment in the input")
			}
			deploy = o
		default:
			return nil, fmt.Errorf("%s %s: no place in the chart for this kind", kind, name)
		}
	}
	if deploy == nil {
		return nil, errors.New("no Deployment in the input")
	}
	m, err := newManager(deploy)
	if err != nil {
		return nil, err
	}
	files["templates/manager/manager.yaml"] = m.template()
	files["templates/manager/cli-config.yaml"] = cliConfigTemplate
	files["values.yaml"] = m.values() + monitoringValues
	mon, err := monitoringFiles()
	if err != nil {
		return nil, err
	}
	maps.Copy(files, mon)
	files["Chart.yaml"] = chartYAML(version, m.tag)
	files["templates/_helpers.tpl"] = helpers
	files["templates/NOTES.txt"] = notes
	files[".helmignore"] = helmignore
	return files, nil
}

// write replaces dir with files.
func write(dir string, files map[string]string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// str returns the string at path in o, or "".
func str(o object, path ...string) string {
	v, _ := get(o, path...).(string)
	return v
}

// get returns the value at path in o, or nil.
func get(o object, path ...string) any {
	var cur any = o
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}
