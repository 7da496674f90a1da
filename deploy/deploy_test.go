package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"github.com/brp/levering/internal/brptest"
	"github.com/brp/levering/internal/load"
	"github.com/brp/levering/internal/rig"
)

const (
	rulesFile     = "prometheus/alerts.yaml"
	rulesTestFile = "prometheus/alerts_test.yaml"
	dashboardFile = "grafana/brp-levering.json"
	// runbookBase is where every alert's runbook_url points: its section in docs/operations.md.
	runbookBase = "https://github.com/brp/levering/blob/main/docs/operations.md"
)

// tool finds a command that scripts/test.sh installs; its absence fails the test, and skips
// it in the unit lane (-short), which needs nothing but Go.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil && testing.Short() {
		t.Skipf("-short: %s is not on PATH (apt-get install -y %s; scripts/test.sh does)", name, pkg)
	}
	if err != nil {
		t.Fatalf("%s not found on PATH: install it with apt-get install -y %s (scripts/test.sh does)", name, pkg)
	}
	return p
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "prometheus")
	run(t, ".", nil, promtool, "check", "rules", rulesFile)
	out := run(t, "prometheus", nil, promtool, "test", "rules", filepath.Base(rulesTestFile))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTestFile struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The alerts the operations table (docs/operations.md) asks for, each with a for: duration, a severity, runbook text,
// and unit tests in which it fires and in which it stays quiet.
func TestEveryAlertHasARunbookAndFiresAndQuietsInTests(t *testing.T) {
	t.Parallel()
	var rules ruleFile
	var tests ruleTestFile
	readYAML(t, rulesFile, &rules)
	readYAML(t, rulesTestFile, &tests)
	operations, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.For == "" || !slices.Contains([]string{"critical", "warning"}, r.Labels["severity"]) {
				t.Errorf("%s: for %q, severity %q; want a for: duration and severity critical or warning", r.Alert, r.For, r.Labels["severity"])
			}
			if want := runbookBase + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(operations), "\n### "+r.Alert+"\n") {
				t.Errorf("%s: no runbook section \"### %s\" in docs/operations.md", r.Alert, r.Alert)
			}
			for _, k := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s has no %s annotation", r.Alert, k)
				}
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: a unit test where it fires: %v, where it stays quiet: %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for _, want := range []string{"BrpLeveringNoLeader", "BrpLeveringOldestUndeliveredAging", "BrpLeveringFout",
		"BrpLeveringHeldBehindFout", "BrpLeveringHorizonWaitHigh", "BrpLeveringRepublished", "BrpLeveringSetAside", "BrpLeveringInLeveringAtCap",
		"BrpLeveringConsumerStalled"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

// dashboardExprs returns every query of the dashboard, its panels' and its variables'.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				} else if s, ok := x.(string); ok && k == "query" && v["type"] == "query" {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
	if len(exprs) < 10 {
		t.Fatalf("%s holds %d queries; is it the dashboard?", dashboardFile, len(exprs))
	}
	return exprs
}

// grafanaVar is a variable Grafana fills in; the ones it sets itself become a range.
var grafanaVar = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{?[A-Za-z_]+\}?`)

// metricNames parses expr as PromQL (Grafana's interval variables as 5m) and returns the
// metric names it selects. A selector without a literal name is an error: the check below
// could not see what it reads.
func metricNames(expr string) ([]string, error) {
	var unknown string
	expr = grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.HasPrefix(v, "$__") {
			return "5m"
		}
		unknown = v
		return v
	})
	if unknown != "" {
		return nil, fmt.Errorf("unknown variable %s", unknown)
	}
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				err = fmt.Errorf("selector %s has no metric name", vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, err
}

// usedMetrics returns the metric names of the alert rules and the dashboard, with where each
// is used.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	used := map[string][]string{}
	add := func(where, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			add(rulesFile+" "+r.Alert, r.Expr)
		}
	}
	for _, e := range dashboardExprs(t) {
		add(dashboardFile, e)
	}
	return used
}

func TestDashboardQueriesArePromQL(t *testing.T) {
	t.Parallel()
	if len(usedMetrics(t)) == 0 {
		t.Fatal("no metric named")
	}
}

// exported scrapes url and returns the sample names it exposes (a histogram's _bucket, _sum
// and _count).
func exported(t *testing.T, url string, into map[string]bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			into[name+"_bucket"], into[name+"_sum"], into[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			into[name], into[name+"_sum"], into[name+"_count"] = true, true, true
		default:
			into[name] = true
		}
	}
}

// Every metric the alert rules and the dashboard name is exported by the real commands: a
// publicatie and a mutatielevering that delivered a small workload, scraped as Prometheus
// would.
func TestRulesAndDashboardNameOnlyExportedMetrics(t *testing.T) {
	t.Parallel()
	used := usedMetrics(t)
	db, dbURL := brptest.DB(t)
	hs := load.Generate(load.Spec{N: 40, Personen: 8, Multi: 0.3, NoPerson: 1, Seed: 41})
	if err := load.Insert(context.Background(), db, hs); err != nil {
		t.Fatal(err)
	}
	q := brptest.NewQueues(t)
	pub := brptest.Start(t, "publicatie", brptest.Build(t, "cmd/publicatie"), rig.Env(brptest.Broker(), dbURL, q)...)
	con := brptest.Start(t, "mutatielevering", brptest.Build(t, "cmd/mutatielevering"), rig.Env(brptest.Broker(), dbURL, q)...)
	brptest.Eventually(t, 2*time.Minute, func() error {
		if st := brptest.Statuses(t, db); st["geleverd"] != len(hs)-1 || st["fout"] != 1 {
			return fmt.Errorf("statuses %v, want %d geleverd and 1 fout", st, len(hs)-1)
		}
		return nil
	})
	have := map[string]bool{}
	for _, p := range []*brptest.Proc{pub, con} {
		exported(t, "http://"+p.HTTPAddr()+"/metrics", have)
	}
	var missing []string
	for name, where := range used {
		if !have[name] {
			slices.Sort(where)
			missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(slices.Compact(where), "; ")))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("named but not exported by publicatie or mutatielevering:\n%s", strings.Join(missing, "\n"))
	}
}

// compose.yaml, alone and with compose.operate.yaml, is valid for Compose and publishes no
// port beyond the host's loopback.
func TestComposeFilesAreValidAndPublishOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	dc := tool(t, "docker-compose", "docker-compose")
	users := filepath.Join(t.TempDir(), "operators.htpasswd")
	if err := os.WriteFile(users, []byte("anna:$2y$05$qgjZYMp2dZk82.YYP7jjOeGEzQ0RnK/AptW8YSTMVgHaG2DLzNZG2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, files := range [][]string{{"compose.yaml"}, {"compose.yaml", "compose.operate.yaml"}} {
		var args []string
		for _, f := range files {
			args = append(args, "-f", f)
		}
		env := []string{"BRP_OPERATE_USERS=" + users}
		run(t, "..", env, dc, append(args, "config", "-q")...)
		var cfg struct {
			Services map[string]struct {
				Ports       []any          `yaml:"ports"`
				Environment map[string]any `yaml:"environment"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal([]byte(run(t, "..", env, dc, append(args, "config")...)), &cfg); err != nil {
			t.Fatal(err)
		}
		published := 0
		for name, s := range cfg.Services {
			for _, p := range s.Ports {
				published++
				if ps, ok := p.(string); !ok || !strings.HasPrefix(ps, "127.0.0.1:") {
					t.Errorf("%v: %s publishes %v beyond loopback", files, name, p)
				}
			}
			if a, ok := s.Environment["BRP_OPERATE_ADDR"]; ok && s.Environment["BRP_OPERATE_USERS_FILE"] == nil {
				t.Errorf("%v: %s serves the operator pages on %v without users", files, name, a)
			}
		}
		if published == 0 {
			t.Errorf("%v: no published port found; did the output format change?", files)
		}
	}
}
