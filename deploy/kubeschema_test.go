package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The schemas kubeconform checks the chart against come from the sources themselves, pinned: the
// Kubernetes API's OpenAPI document and the Prometheus Operator's CRDs, both fetched through
// the Go module proxy (kubeconform's default, a download from GitHub, is not reachable here).
const (
	kubernetesModule = "k8s.io/kubernetes@v1.31.4"
	kubernetesSpec   = "api/openapi-spec/swagger.json"
	operatorModule   = "github.com/prometheus-operator/prometheus-operator@v0.78.2"
	operatorCRDs     = "example/prometheus-operator-crd"
)

// kubeconformLocation is the -schema-location template matching the files kubeSchemas writes.
const kubeconformLocation = "{{ .ResourceKind }}_{{ .Group }}_{{ .ResourceAPIVersion }}.json"

// moduleDir downloads a module into the module cache and returns its directory.
func moduleDir(t *testing.T, modVersion string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", modVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", modVersion, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s", modVersion, err, m.Error)
	}
	return m.Dir
}

// kubeSchemas writes standalone, strict JSON schemas (every $ref inlined, no property the API
// does not know) of the Kubernetes kinds and of the Prometheus Operator's kinds into a
// directory and returns the -schema-location for kubeconform.
func kubeSchemas(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(moduleDir(t, kubernetesModule), kubernetesSpec))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatalf("%s: %v", kubernetesSpec, err)
	}
	defs := spec.Definitions
	for name, def := range defs {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk := g.(map[string]any)
			group, version, kind := gvk["group"].(string), gvk["version"].(string), gvk["kind"].(string)
			schema := strictSchema(expand(defs, map[string]any{"$ref": "#/definitions/" + name}, nil))
			writeSchema(t, dir, group, version, kind, schema)
		}
	}
	crds, err := filepath.Glob(filepath.Join(moduleDir(t, operatorModule), operatorCRDs, "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in %s/%s: %v", operatorModule, operatorCRDs, err)
	}
	for _, f := range crds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group    string
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			writeSchema(t, dir, crd.Spec.Group, v.Name, crd.Spec.Names.Kind, strictSchema(v.Schema.OpenAPIV3Schema))
		}
	}
	return filepath.Join(dir, kubeconformLocation)
}

func writeSchema(t *testing.T, dir, group, version, kind string, schema any) {
	t.Helper()
	apiVersion := version
	if group != "" {
		apiVersion = group + "/" + version
	}
	parts := strings.Split(apiVersion, "/")
	name := fmt.Sprintf("%s_%s_%s.json", strings.ToLower(kind), parts[0], parts[len(parts)-1])
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// expand inlines every $ref of v; a reference to a definition already being expanded (the
// recursive JSONSchemaProps of CRDs) becomes an empty schema, which allows anything.
func expand(defs map[string]map[string]any, v any, stack []string) any {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			for _, s := range stack {
				if s == name {
					return map[string]any{}
				}
			}
			out := expand(defs, defs[name], append(stack, name)).(map[string]any)
			if d, ok := v["description"]; ok {
				out["description"] = d
			}
			return out
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = expand(defs, e, stack)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = expand(defs, e, stack)
		}
		return out
	}
	return v
}

// strictSchema turns OpenAPI schema into JSON schema the way kubectl validates: objects with
// declared properties allow no others, int-or-string allows both.
func strictSchema(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = strictSchema(e)
		}
		if v["format"] == "int-or-string" || v["x-kubernetes-int-or-string"] == true {
			delete(out, "type")
			delete(out, "format")
			out["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		}
		if _, ok := v["properties"]; ok {
			if _, ok := v["additionalProperties"]; !ok && v["x-kubernetes-preserve-unknown-fields"] != true {
				out["additionalProperties"] = false
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = strictSchema(e)
		}
		return out
	}
	return v
}
