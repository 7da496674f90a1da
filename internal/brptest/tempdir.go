package brptest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// processTempDir makes a temporary directory for what a test process builds once and keeps
// for its lifetime (compiled Java classes; the commands' binaries, until Build shared one
// directory per checkout). A test binary has no hook at its exit to remove it, and a binary is
// 20 MB: every test process that built one left it, and a developer's /tmp held 387 of them
// (7.3 GB). So each is named after its process,
// prefix + pid + "-", and every new one first removes those of processes that have ended. A
// pid reused by another process keeps its directory until that process ends too: a leak, not
// a loss.
func processTempDir(prefix string) (string, error) {
	pruneTempDirs(prefix)
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// pruneTempDirs removes the directories processTempDir made for prefix in processes that are
// no longer running.
func pruneTempDirs(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*-*"))
	for _, d := range dirs {
		if ended(strings.TrimPrefix(filepath.Base(d), prefix), '-') {
			_ = os.RemoveAll(d)
		}
	}
}

// ended reports whether name, which begins with a pid ended by sep, names a process of this
// host that is no longer running (not this one, nor a name without a pid).
func ended(name string, sep byte) bool {
	pid, err := strconv.Atoi(name[:max(0, strings.IndexByte(name, sep))])
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
