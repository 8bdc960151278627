package policies_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// schemaFile is Kubernetes' published OpenAPI v3 document of the core/v1
// group, cut down to what Service and ConfigMap (the policy's object and
// params) refer to and without descriptions. It comes from the
// k8s.io/kubernetes module at the version the control plane is built from:
//
//	go test ./policies -run TestServicePins_TypeChecks -update-schema="$(cd tools/kube && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/api/openapi-spec/v3/api__v1_openapi.json"
const schemaFile = "testdata/api__v1_openapi.json"

var updateSchema = flag.String("update-schema", "", "rewrite "+schemaFile+" from this full api__v1_openapi.json")

// schemaRoots are the definitions kept in schemaFile, with all they refer to.
var schemaRoots = []string{"io.k8s.api.core.v1.Service", "io.k8s.api.core.v1.ConfigMap"}

const refPrefix = "#/components/schemas/"

// openAPIDocument is the part of an OpenAPI v3 document that holds schemas.
type openAPIDocument struct {
	Components struct {
		Schemas map[string]*spec.Schema `json:"schemas"`
	} `json:"components"`
}

// staticResolver resolves built-in kinds from schemaFile the way the API
// server resolves them from its own OpenAPI document: by the
// x-kubernetes-group-version-kind extension, with references inlined.
type staticResolver struct {
	schemas map[string]*spec.Schema
}

func loadStaticResolver(t *testing.T) *staticResolver {
	t.Helper()
	if *updateSchema != "" {
		if err := writeTrimmedSchema(*updateSchema, schemaFile); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPIDocument
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return &staticResolver{schemas: doc.Components.Schemas}
}

func (r *staticResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	for name, s := range r.schemas {
		var gvks []schema.GroupVersionKind
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil {
			return nil, err
		}
		for _, g := range gvks {
			if g == gvk {
				return resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
					s, ok := r.schemas[strings.TrimPrefix(ref, refPrefix)]
					return s, ok
				}, name)
			}
		}
	}
	return nil, fmt.Errorf("%v: %w", gvk, resolver.ErrSchemaNotFound)
}

// writeTrimmedSchema keeps schemaRoots and every definition they reach
// through $ref, dropping descriptions (the type checker reads none).
func writeTrimmedSchema(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	kept := map[string]any{}
	queue := append([]string(nil), schemaRoots...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, ok := kept[name]; ok {
			continue
		}
		s, ok := doc.Components.Schemas[name]
		if !ok {
			return fmt.Errorf("%s: no definition %s", from, name)
		}
		s = stripDescriptions(s)
		kept[name] = s
		queue = append(queue, refsOf(s)...)
	}
	var out struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	out.Components.Schemas = kept
	b, err = json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(to, append(b, '\n'), 0o644)
}

// stripDescriptions removes the description of a schema and of the schemas
// nested in it; a property that happens to be called "description" stays.
func stripDescriptions(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			switch k {
			case "description":
				if _, ok := e.(string); ok {
					continue
				}
				out[k] = stripDescriptions(e)
			case "properties":
				props := map[string]any{}
				for name, p := range e.(map[string]any) {
					props[name] = stripDescriptions(p)
				}
				out[k] = props
			default:
				out[k] = stripDescriptions(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = stripDescriptions(e)
		}
		return out
	default:
		return v
	}
}

func refsOf(v any) []string {
	var refs []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				refs = append(refs, strings.TrimPrefix(s, refPrefix))
				continue
			}
			refs = append(refs, refsOf(e)...)
		}
	case []any:
		for _, e := range v {
			refs = append(refs, refsOf(e)...)
		}
	}
	return refs
}
