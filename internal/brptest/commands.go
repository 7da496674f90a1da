package brptest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
//
// The binaries go to one directory per checkout, shared by its test processes (binDir), where
// go build finds a binary up to date when nothing it is built from changed and then does not
// link it again. A full lane runs about 25 test processes that build a command, and a link
// costs 1-2 CPU-seconds; every process once linked its own copy into a directory of its own.
// A lock file per binary keeps two processes from building the same one at once.
func Build(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	NeedsServices(t)
	key := pkg + " " + strings.Join(tags, ",")
	v, _ := builds.LoadOrStore(key, &buildResult{})
	b := v.(*buildResult)
	b.once.Do(func() { b.path, b.err = build(pkg, tags) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// build runs go build for Build, under the binary's lock.
func build(pkg string, tags []string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	name := filepath.Base(pkg)
	if len(tags) > 0 {
		name += "-" + strings.Join(tags, "-")
	}
	path := filepath.Join(dir, name)
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if out, err := exec.Command("go", append(args, "github.com/brp/levering/"+pkg)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return path, nil
}

// binDir is Build's directory for this checkout, in the temporary directory, named after a
// hash of the checkout's path. go build replaces a binary that is out of date by a new file
// (it removes the old one first), so a process still running the old one is not disturbed.
func binDir() (string, error) {
	abs, err := filepath.Abs(repoDir())
	if err != nil {
		return "", err
	}
	pruneTempDirs("brpbin-") // the per-process directories Build made before
	sum := sha256.Sum256([]byte(abs))
	dir := filepath.Join(os.TempDir(), "brp-levering-bin-"+hex.EncodeToString(sum[:6]))
	return dir, os.MkdirAll(dir, 0o700)
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
