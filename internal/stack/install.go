package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// install installs, with apt-get, the Debian packages that the components (pg, amq, rmq) need
// and that are missing.
func (s *stack) install(ctx context.Context, components ...string) error {
	var pkgs []string
	for _, c := range components {
		pkgs = append(pkgs, s.missing(c)...)
	}
	if len(pkgs) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing %s; install as root: apt-get install -y --no-install-recommends %[1]s", strings.Join(pkgs, " "))
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing %s and no apt-get to install them", strings.Join(pkgs, " "))
	}
	if err := os.MkdirAll(s.cfg.RunDir, 0o755); err != nil {
		return err
	}
	aptLog := filepath.Join(s.cfg.RunDir, "apt.log")
	t0 := time.Now()
	s.logf("installing %s with apt-get (log: %s)", strings.Join(pkgs, " "), aptLog)
	logf, err := os.Create(aptLog)
	if err != nil {
		return err
	}
	defer logf.Close()
	// Another apt-get may hold the dpkg lock (another checkout, a developer): wait for it.
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=300", "update"},
		append([]string{"install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300",
			"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}, pkgs...),
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s failed: %w%s", args[len(args)-1], err, tail(aptLog, 30))
		}
	}
	s.logf("installed %s in %d s", strings.Join(pkgs, " "), int(time.Since(t0).Seconds()))
	for _, c := range components {
		if m := s.missing(c); len(m) > 0 {
			return fmt.Errorf("installed, but %s still missing", strings.Join(m, " "))
		}
	}
	return nil
}

// missing lists the packages component lacks.
func (s *stack) missing(component string) []string {
	var pkgs []string
	switch component {
	case "pg":
		if _, err := pgBinDir(); err != nil {
			pkgs = append(pkgs, "postgresql")
		}
	case "amq":
		if !exists(filepath.Join(s.cfg.ActiveMQHome, "bin", "activemq.jar")) {
			pkgs = append(pkgs, "activemq")
		}
		if _, err := exec.LookPath("java"); err != nil {
			pkgs = append(pkgs, "default-jre-headless")
		}
		// Optional for the broker, but STOMP's transformation jms-map-json (read by the
		// statisticsBrokerPlugin's replies) fails without them.
		if !exists("/usr/share/java/xstream.jar") {
			pkgs = append(pkgs, "libxstream-java")
		}
		if !exists("/usr/share/java/jettison.jar") {
			pkgs = append(pkgs, "libjettison-java")
		}
	case "rmq":
		if !s.rabbitInstalled() {
			pkgs = append(pkgs, "rabbitmq-server")
		}
	}
	return pkgs
}

// rabbitInstalled reports whether RabbitMQ's server script and its STOMP plugin are there.
func (s *stack) rabbitInstalled() bool {
	server, err := filepath.EvalSymlinks(filepath.Join(s.cfg.RabbitBin, "rabbitmq-server"))
	if err != nil {
		return false
	}
	plugins, _ := filepath.Glob(filepath.Join(filepath.Dir(server), "..", "plugins", "rabbitmq_stomp-*"))
	return len(plugins) > 0
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
