//go:build unix

package filefence_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/filefence"
	"github.com/fenced-dev/fenced/internal/bounded"
)

// TestDir_LockedWaitsForContext holds a name's lock on another open file
// description, as another process would, and checks that a write waits for
// it and gives up with its context, changing nothing.
func TestDir_LockedWaitsForContext(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.WriteFile(ctx(t), "out", 5, []byte("v5"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(path, filefence.SidecarDir, "out.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, path)
	c, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	if err := d.WriteFile(c, "out", 9, []byte("v9"), 0o644); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteFile while locked=%v, want context.DeadlineExceeded", err)
	}
	if after := snapshot(t, path); !sameSnapshot(before, after) {
		t.Fatalf("a write that gave up changed the directory: %v -> %v", before, after)
	}

	// Released, a waiting write goes through.
	done := make(chan error, 1)
	go func() { done <- d.WriteFile(ctx(t), "out", 9, []byte("v9"), 0o644) }()
	time.Sleep(20 * time.Millisecond)
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if err := bounded.Recv(t, "write after the unlock", time.Minute, done); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(path, "out")); got != "v9" {
		t.Fatalf("file holds %q, want v9", got)
	}
}

func TestDir_Perm(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o444} {
		if err := d.WriteFile(ctx(t), "out", 1, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(path, "out"))
		if err != nil {
			t.Fatal(err)
		}
		if want := perm &^ umask(); fi.Mode().Perm() != want {
			t.Errorf("mode=%v, want %v", fi.Mode().Perm(), want)
		}
	}
}

// umask returns the process's umask.
func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}
