package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	chartDir    = "helm/brp-levering"
	kubeVersion = "1.31.4" // the Kubernetes the schemas come from (kubernetesModule)
)

// The chart carries the tested rules and dashboard as copies (Helm reads files only inside the
// chart): they must not drift from the originals.
func TestChartCarriesTheTestedRulesAndDashboard(t *testing.T) {
	t.Parallel()
	for orig, chartFile := range map[string]string{
		rulesFile:     filepath.Join(chartDir, "files", "alerts.yaml"),
		dashboardFile: filepath.Join(chartDir, "files", "brp-levering.json"),
	} {
		a, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(chartFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: cp deploy/%s deploy/%s", chartFile, orig, orig, chartFile)
		}
	}
}

// chartValues are sets of --set values the chart is rendered with: the defaults and every
// optional part switched the other way.
var chartValues = map[string][]string{
	"defaults": nil,
	"everything off": {"migrate.enabled=false", "podDisruptionBudget.enabled=false", "networkPolicy.enabled=false",
		"serviceMonitor.enabled=false", "prometheusRule.enabled=false", "dashboard.enabled=false"},
	"tls and digest": {"broker.tls.enabled=true", "broker.tls.secret=brp-broker-tls", "broker.tls.clientCertificate=true",
		"database.caSecret=brp-db-ca", "image.digest=sha256:" + strings.Repeat("ab", 32),
		"networkPolicy.databaseTo[0].ipBlock.cidr=10.1.0.0/16", "publicatie.env.BRP_LEVERING_ADMHNDPUBLICATIE_LIMIT=2000"},
}

func helmTemplate(t *testing.T, set []string) []byte {
	t.Helper()
	helm := tool(t, "helm", "scripts/test.sh installs it: go install helm.sh/helm/v3/cmd/helm")
	args := []string{"template", "brp", chartDir, "--namespace", "brp", "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return []byte(run(t, ".", nil, helm, args...))
}

func TestChartLintsAndRendersValidManifests(t *testing.T) {
	t.Parallel()
	helm := tool(t, "helm", "scripts/test.sh installs it: go install helm.sh/helm/v3/cmd/helm")
	kubeconform := tool(t, "kubeconform", "scripts/test.sh installs it: go install github.com/yannh/kubeconform/cmd/kubeconform")
	out := run(t, ".", nil, helm, "lint", "--strict", chartDir)
	if !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint:\n%s", out)
	}
	location := kubeSchemas(t)
	for name, set := range chartValues {
		rendered := filepath.Join(t.TempDir(), "rendered.yaml")
		if err := os.WriteFile(rendered, helmTemplate(t, set), 0o644); err != nil {
			t.Fatal(err)
		}
		out := run(t, ".", nil, kubeconform, "-strict", "-summary", "-kubernetes-version", kubeVersion,
			"-schema-location", location, rendered)
		if !strings.Contains(out, "Invalid: 0, Errors: 0, Skipped: 0") {
			t.Errorf("%s: kubeconform:\n%s", name, out)
		}
		t.Logf("%s: %s", name, strings.TrimSpace(out))
	}
}

// manifest is the part of a rendered object the checks below read.
type manifest struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Template struct {
			Spec podSpec
		}
	}
}

type podSpec struct {
	SecurityContext map[string]any `yaml:"securityContext"`
	Containers      []struct {
		Name    string
		Command []string
		Env     []struct{ Name, Value string }
		Ports   []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		SecurityContext map[string]any `yaml:"securityContext"`
		StartupProbe    *probe         `yaml:"startupProbe"`
		LivenessProbe   *probe         `yaml:"livenessProbe"`
		ReadinessProbe  *probe         `yaml:"readinessProbe"`
	}
}

type probe struct {
	HTTPGet struct{ Path, Port string } `yaml:"httpGet"`
}

func renderedWorkloads(t *testing.T, set []string) []manifest {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(helmTemplate(t, set)))
	var out []manifest
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == "Deployment" || m.Kind == "Job" {
			out = append(out, m)
		}
	}
}
