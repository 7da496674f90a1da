package setup

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brp/levering/handeling"
)

// version is the release, set at build time:
// go build -ldflags "-X github.com/brp/levering/cmd/internal/setup.version=1.4.0".
var version string

// revision is the commit, set at build time where the VCS is not at hand (the image's build
// context leaves .git out): -X github.com/brp/levering/cmd/internal/setup.revision=abc123.
// Unset, the build's VCS information gives it.
var revision string

// Build describes the running binary.
type Build struct {
	Version   string // the release, or "dev"
	Revision  string // the VCS commit it was built from ("unknown" outside a checkout)
	Modified  bool   // built from a checkout with uncommitted changes
	GoVersion string
}

// BuildInfo reads what the binary knows about its build.
func BuildInfo() Build {
	b := Build{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok && b.Revision == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	return b
}

// String is the --version line.
func (b Build) String() string {
	mod := ""
	if b.Modified {
		mod = " (modified)"
	}
	return fmt.Sprintf("%s revision %s%s, %s", b.Version, b.Revision, mod, b.GoVersion)
}

// buildInfoCollector exports brp_levering_build_info{version, revision, goversion} 1, so that
// dashboards and alerts can tell which release each process runs.
func buildInfoCollector() prometheus.Collector {
	b := BuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: handeling.MetricsNamespace, Name: "build_info",
		Help:        "1; the labels say which build this process runs.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}})
	g.Set(1)
	return g
}
