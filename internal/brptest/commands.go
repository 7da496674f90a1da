package brptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The project's commands, built once per test process and run as a user would.

var builds sync.Map // package path -> *buildResult

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Build compiles one of the project's commands (for example "cmd/publicatie") once per test
// process and returns the binary's path.
func Build(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	NeedsServices(t)
	key := pkg + " " + strings.Join(tags, ",")
	v, _ := builds.LoadOrStore(key, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() {
		dir, err := processTempDir("brpbin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		args := []string{"build", "-o", b.path}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		out, err := exec.Command("go", append(args, "github.com/brp/levering/"+pkg)...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RunBad runs bin with one environment variable set to a value, expecting a start-up refusal,
// and returns the exit code and standard error. Other BRP_ variables are cleared so that only
// the variable under test can be wrong.
func RunBad(t testing.TB, bin, name, value string, args ...string) (int, string) {
	t.Helper()
	NeedsServices(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BRP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BRP_HTTP_ADDR=off", "BRP_DATABASE_URL="+DatabaseURL(), name+"="+value)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s with %s=%q did not stop at start", bin, name, value)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String()
}

// HelpShows runs a command's run function with --help and fails the test for each of want
// ("VARIABLE default") that its output does not show (runs of spaces between a variable and
// its default count as one).
func HelpShows(t testing.TB, run func(context.Context, []string, io.Writer, io.Writer) error, want ...string) {
	t.Helper()
	var out strings.Builder
	if err := run(context.Background(), []string{"--help"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out.String()), " ")
	for _, w := range want {
		if !strings.Contains(flat, w) {
			t.Errorf("--help shows no %q:\n%s", w, out.String())
		}
	}
}
