package brptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestPruneTempDirsRemovesOnlyThoseOfEndedProcesses(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Skipf("cannot run true to get an ended process's pid: %v", err)
	}
	dir := func(pid int) string {
		d := filepath.Join(os.TempDir(), "brpbin-"+strconv.Itoa(pid)+"-42")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone, own, parent := dir(ended.Process.Pid), dir(os.Getpid()), dir(os.Getppid())
	other := filepath.Join(os.TempDir(), "brp-jms-"+strconv.Itoa(ended.Process.Pid)+"-1") // another prefix
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	made, err := processTempDir("brpbin-")
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{gone: false, own: true, parent: true, other: true, made: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}
