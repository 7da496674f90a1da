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
// for its lifetime (a command's binary, compiled Java classes). A test binary has no hook at
// its exit to remove it, and a binary is 20 MB: every test process that built one left it,
// and a developer's /tmp held 387 of them (7.3 GB). So each is named after its process,
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
		rest := strings.TrimPrefix(filepath.Base(d), prefix)
		pid, err := strconv.Atoi(rest[:max(0, strings.IndexByte(rest, '-'))])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}
