package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/rig"
)

// goTool finds a command that scripts/test.sh installs from the Go module proxy; its absence
// fails the test, and skips it in the unit lane (-short), which needs nothing but Go.
func goTool(t *testing.T, name, module string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil && testing.Short() {
		t.Skipf("-short: %s is not on PATH (GOBIN=$PWD/.run/bin go install %s; scripts/test.sh does)", name, module)
	}
	if err != nil {
		t.Fatalf("%s not found on PATH: install it with GOBIN=$PWD/.run/bin go install %s and put .run/bin on PATH (scripts/test.sh does)", name, module)
	}
	return p
}

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
	helm := goTool(t, "helm", "helm.sh/helm/v3/cmd/helm@v3.16.3")
	args := []string{"template", "brp", chartDir, "--namespace", "brp", "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return []byte(run(t, ".", nil, helm, args...))
}

func TestChartLintsAndRendersValidManifests(t *testing.T) {
	t.Parallel()
	helm := goTool(t, "helm", "helm.sh/helm/v3/cmd/helm@v3.16.3")
	kubeconform := goTool(t, "kubeconform", "github.com/yannh/kubeconform/cmd/kubeconform@v0.6.7")
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

// The chart's workloads start the real binaries as rendered: each command exists, the
// environment it renders is accepted, the container port is the one BRP_HTTP_ADDR listens on,
// and the probes' paths are served there (startup and liveness: 200 at once; readiness: 200
// once the database and broker are reached).
func TestChartWorkloadsMatchTheBinaries(t *testing.T) {
	t.Parallel()
	set := []string{"broker.tls.enabled=false"}
	workloads := renderedWorkloads(t, set)
	if len(workloads) != 3 {
		t.Fatalf("rendered %d workloads, want the migrate Job and two Deployments", len(workloads))
	}
	db, dbURL := brptest.DB(t)
	db.MustExec(`insert into admhnd (id, soort, tsreg) values (1, 'GEBOORTE', now())`)
	db.MustExec(`insert into admhnd_persoon (admhnd_id, persoon_id) values (1, 1)`)
	q := brptest.NewQueues(t)
	bins := map[string]string{"publicatie": brptest.Build(t, "cmd/publicatie"), "mutatielevering": brptest.Build(t, "cmd/mutatielevering")}
	secrets := t.TempDir()
	for _, w := range workloads {
		spec := w.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", w.Metadata.Name, len(spec.Containers))
		}
		c := spec.Containers[0]
		if spec.SecurityContext["runAsNonRoot"] != true || c.SecurityContext["readOnlyRootFilesystem"] != true ||
			c.SecurityContext["allowPrivilegeEscalation"] != false {
			t.Errorf("%s: securityContext %v / %v", w.Metadata.Name, spec.SecurityContext, c.SecurityContext)
		}
		bin, ok := bins[c.Command[0]]
		if !ok {
			t.Fatalf("%s: command %q is not one of the binaries", w.Metadata.Name, c.Command)
		}
		// Every variable the chart sets is one the binary reads (its --help lists them all).
		code, help := runEnv(t, bin, nil, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", c.Command[0], code, help)
		}
		for _, e := range c.Env {
			if !strings.Contains(help, "  "+e.Name+" ") {
				t.Errorf("%s: the chart sets %s, which %s does not read", w.Metadata.Name, e.Name, c.Command[0])
			}
		}
		// The rendered environment, with the cluster's addresses and files replaced by the test's.
		var env []string
		httpAddr := ""
		for _, e := range c.Env {
			v := e.Value
			switch e.Name {
			case "BRP_DATABASE_URL":
				v = dbURL
			case "BRP_STOMP_ADDR":
				v = brptest.Broker().Addr
			case "BRP_STOMP_LOGIN":
				v = brptest.Broker().Login
			case "BRP_HTTP_ADDR":
				httpAddr = v
				if v != "off" {
					v = "127.0.0.1:0"
				}
			case "BRP_DATABASE_PASSWORD_FILE", "BRP_STOMP_PASSCODE_FILE":
				v = filepath.Join(secrets, e.Name)
				pw := ""
				if e.Name == "BRP_STOMP_PASSCODE_FILE" {
					pw = brptest.Broker().Passcode
				}
				if err := os.WriteFile(v, []byte(pw+"\n"), 0o400); err != nil {
					t.Fatal(err)
				}
			}
			env = append(env, e.Name+"="+v)
		}
		env = append(env, "BRP_LEVERING_ADMHNDPUBLICATIE_QUEUE="+q.Publicatie, "BRP_LEVERING_VERZENDING_QUEUE="+q.Verzending,
			"BRP_LEVERING_MUTATIELEVERING_DLQ="+q.DLQ, "BRP_STOMP_HOST="+brptest.Broker().Host)
		if w.Kind == "Job" {
			code, out := runEnv(t, bin, env, c.Command[1:]...)
			if code != 0 {
				t.Fatalf("%s: %q: exit %d\n%s", w.Metadata.Name, c.Command, code, out)
			}
			continue
		}
		_, port, _ := strings.Cut(httpAddr, ":")
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(c.Ports[0].ContainerPort) != port {
			t.Errorf("%s: ports %+v, BRP_HTTP_ADDR %q", w.Metadata.Name, c.Ports, httpAddr)
		}
		for _, p := range []*probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			if p == nil || p.HTTPGet.Port != "http" {
				t.Fatalf("%s: probe %+v, want httpGet on port http", w.Metadata.Name, p)
			}
		}
		if c.StartupProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: probe paths %s, %s, %s", w.Metadata.Name, c.StartupProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
		}
		if len(c.Command) != 1 {
			t.Fatalf("%s: command %q, want the binary alone", w.Metadata.Name, c.Command)
		}
		p := brptest.Start(t, c.Command[0], bin, env...)
		addr := p.HTTPAddr()
		brptest.Eventually(t, time.Minute, func() error {
			for _, path := range []string{c.StartupProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path} {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s %s: %s", w.Metadata.Name, path, resp.Status)
				}
			}
			return nil
		})
	}
	// Both ran together as rendered: the handeling was delivered.
	brptest.Eventually(t, time.Minute, func() error {
		if st := brptest.Statuses(t, db); st["geleverd"] != 1 {
			return fmt.Errorf("statuses %v, want 1 geleverd", st)
		}
		return nil
	})
}

// runEnv runs bin with args in a clean environment plus env and returns its exit code and
// output.
func runEnv(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = rig.Environ(env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}
