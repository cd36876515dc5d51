package filefence_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
	"github.com/fenced-dev/fenced/guard/guardtest"
)

// doTarget appends to a file inside Do: apply reads the file and writes it
// back longer through WriteFile, which runs under the lock Do holds. Two
// Dir values on one directory, chosen by the token's parity, stand in for
// two processes: a read-modify-write that was not under one lock would
// lose appends, which the suite's commit-order check sees.
type doTarget struct{ d [2]*filefence.Dir }

var _ guardtest.Appender = doTarget{}

func (dt doTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	d := dt.d[t%2]
	return d.Do(ctx, object, t, func(ctx context.Context) error {
		old := readFileErr(filepath.Join(d.Path(), object))
		if old != "" {
			value = old + "," + value
		}
		return d.WriteFile(ctx, object, t, []byte(value), 0o644)
	})
}

func (dt doTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	return fileTarget{dt.d[0]}.Read(ctx, object)
}

func (doTarget) Appends() bool { return true }

// readFileErr returns a file's content, "" when it cannot be read.
func readFileErr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func TestDir_Guard(t *testing.T) {
	d := openDir(t, t.TempDir())
	guardtest.RunGuard(t, guardtest.Guard{
		Guard:                 d,
		Watermark:             func(_ context.Context, name string) (fence.Token, error) { return d.Watermark(name) },
		KeepsWatermarkOnError: true,
	})
	t.Run("Signed", func(t *testing.T) {
		guardtest.RunSigned(t, guardtest.Guard{Guard: d, Watermark: func(_ context.Context, name string) (fence.Token, error) { return d.Watermark(name) }, FlatNames: true})
	})
}

func TestDir_Do(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.Do(ctx(t), "out", 5, func(ctx context.Context) error {
		return d.WriteFile(ctx, "out", 5, []byte("v5"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	wantMark(t, d, "out", 5)
	if got := readFile(t, filepath.Join(path, "out")); got != "v5" {
		t.Fatalf("file holds %q, want v5", got)
	}

	// A stale token: apply does not run.
	called := false
	wantStale(t, d.Do(ctx(t), "out", 4, func(context.Context) error { called = true; return nil }), 4, 5)
	if called {
		t.Fatal("Do ran apply for a stale token")
	}

	// apply's error comes back unchanged; the watermark was raised before
	// apply ran and stays raised (files cannot be rolled back).
	boom := errors.New("boom")
	if err := d.Do(ctx(t), "out", 8, func(context.Context) error { return boom }); err != boom {
		t.Fatalf("Do=%v, want apply's error unchanged", err)
	}
	wantMark(t, d, "out", 8)
	if got := readFile(t, filepath.Join(path, "out")); got != "v5" {
		t.Fatalf("file holds %q after a failed apply, want v5", got)
	}

	// Nested steps for the same name run under the held lock, and apply
	// their own token's rule.
	err := d.Do(ctx(t), "out", 9, func(ctx context.Context) error {
		return d.Do(ctx, "out", 10, func(ctx context.Context) error {
			if err := d.WriteFile(ctx, "out", 10, []byte("v10"), 0o644); err != nil {
				return err
			}
			wantStale(t, d.WriteFile(ctx, "out", 9, []byte("v9"), 0o644), 9, 10)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantMark(t, d, "out", 10)
	if got := readFile(t, filepath.Join(path, "out")); got != "v10" {
		t.Fatalf("file holds %q, want v10", got)
	}
}

// TestDir_DoHoldsTheLock checks that apply runs under the name's lock:
// another Dir on the same directory waits for it, and a context kept past
// the step holds nothing.
func TestDir_DoHoldsTheLock(t *testing.T) {
	path := t.TempDir()
	d, other := openDir(t, path), openDir(t, path)
	var kept context.Context
	err := d.Do(ctx(t), "out", 3, func(ctx context.Context) error {
		kept = ctx
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := other.Check(short, "out", 3); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Check through another Dir during apply=%v, want it to wait until its context ends", err)
		}
		// Another name is not locked.
		return other.Check(ctx, "elsewhere", 3)
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- other.WriteFile(ctx(t), "out", 4, []byte("v4"), 0o644) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not released when Do returned")
	}
	// The context of a finished step takes the lock as any other.
	if err := d.WriteFile(kept, "out", 5, []byte("v5"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantMark(t, other, "out", 5)
}

func TestDir_DoInvalid(t *testing.T) {
	d := openDir(t, t.TempDir())
	called := false
	apply := func(context.Context) error { called = true; return nil }
	if err := d.Do(ctx(t), "a/b", 1, apply); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("Do(a/b)=%v, want fence.ErrInvalidArgument", err)
	}
	if err := d.Do(ctx(t), "ok", 0, apply); !errors.Is(err, fence.ErrInvalidToken) {
		t.Errorf("Do(token 0)=%v, want fence.ErrInvalidToken", err)
	}
	if called {
		t.Error("Do ran apply for an invalid call")
	}
}
