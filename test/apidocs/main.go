// Command apidocs writes docs/api.md, the API reference of the three kinds,
// from the CRDs controller-gen generates into config/crd: the reference
// cannot disagree with what the API server validates. `make generate` runs
// it and `make verify` fails when docs/api.md is stale.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: apidocs <crd directory> <output file>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# API reference: local.sdn.cozystack.io/v1alpha1\n\n" +
		"Generated from `config/crd` by `make generate` (test/apidocs); do not edit.\n" +
		"`kubectl explain <kind>.spec --api-version=local.sdn.cozystack.io/v1alpha1` shows the same descriptions on a cluster\n" +
		"(without `--api-version`, `ipaddress` means the Kubernetes networking kind; the short names `ipaddr`, `ipclaim` and `ipclass` are unambiguous).\n")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		writeCRD(&b, &crd)
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

func writeCRD(w io.StringWriter, crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		s := v.Schema.OpenAPIV3Schema
		_, _ = w.WriteString(fmt.Sprintf("\n## %s (%s, short name %s)\n\n%s\n\n| field | type | required | description |\n|---|---|---|---|\n",
			crd.Spec.Names.Kind, crd.Spec.Scope, strings.Join(crd.Spec.Names.ShortNames, ", "), oneLine(s.Description)))
		for _, top := range []string{"spec", "status"} {
			if p, ok := s.Properties[top]; ok {
				writeFields(w, top, &p, slices.Contains(s.Required, top))
			}
		}
	}
}

// writeFields writes one row per field, depth first, in name order.
func writeFields(w io.StringWriter, path string, p *apiextensionsv1.JSONSchemaProps, required bool) {
	typ := p.Type
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
		typ = "[]" + p.Items.Schema.Type
	}
	if len(p.Enum) > 0 {
		var vals []string
		for _, e := range p.Enum {
			vals = append(vals, strings.Trim(string(e.Raw), `"`))
		}
		typ += " (" + strings.Join(vals, ", ") + ")"
	}
	req := ""
	if required {
		req = "yes"
	}
	_, _ = w.WriteString(fmt.Sprintf("| `%s` | %s | %s | %s |\n", path, typ, req, oneLine(p.Description)))
	props := p.Properties
	prefix := path + "."
	reqs := p.Required
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
		props, prefix, reqs = p.Items.Schema.Properties, path+"[].", p.Items.Schema.Required
	}
	for _, name := range sortedKeys(props) {
		child := props[name]
		writeFields(w, prefix+name, &child, slices.Contains(reqs, name))
	}
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "), "|", `\|`)
}
