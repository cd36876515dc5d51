//go:build unix

package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockFileName is the file in the data dir whose flock marks the dir as open.
const lockFileName = "LOCK"

// dirLock is an exclusive flock on DataDir/LOCK. The kernel drops it when
// the process dies, so a node killed with kill -9 leaves no stale lock. The
// file itself stays (removing it would race with the next locker); it holds
// the pid of the last holder, for the error message.
type dirLock struct {
	f *os.File
}

// lockDataDir takes the exclusive lock of dir, or fails at once with an error
// wrapping ErrDataDirInUse. A flock belongs to an open file description, so
// a second Open of the same dir fails within one process too.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid := strings.TrimSpace(string(b)); pid != "" {
					holder = " (pid " + pid + ")"
				}
			}
			return nil, fmt.Errorf("data dir %s is in use by another fenced process%s; stop it or use another data dir: %w", dir, holder, ErrDataDirInUse)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	// Record our pid for the next process's error message. Best effort: the
	// lock, not the content, is what protects the dir.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock. Closing the file releases the flock.
func (l *dirLock) release() error {
	return l.f.Close()
}
