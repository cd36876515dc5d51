package filefence_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/internal/bounded"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// openDir opens path as a Dir closed when t ends.
func openDir(t testing.TB, path string, opts ...filefence.Option) *filefence.Dir {
	t.Helper()
	d, err := filefence.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// readFile returns the content of a file, "" if it does not exist.
func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// snapshot returns every file and directory under root with its content.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			files[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// tempFiles lists the temporary files in dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".fence-tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantStale(t *testing.T, err error, presented, required fence.Token) {
	t.Helper()
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("err=%v, want a *fence.StaleTokenError", err)
	}
	if se.Presented != presented || se.Required != required {
		t.Fatalf("StaleTokenError{Presented: %d, Required: %d}, want {%d, %d}", se.Presented, se.Required, presented, required)
	}
}

func wantMark(t *testing.T, d *filefence.Dir, name string, want fence.Token) {
	t.Helper()
	got, err := d.Watermark(name)
	if err != nil || got != want {
		t.Fatalf("Watermark(%q)=%d, %v; want %d", name, got, err, want)
	}
}

// fileTarget writes with WriteFile through one Dir.
type fileTarget struct{ d *filefence.Dir }

func (f fileTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return f.d.WriteFile(ctx, object, t, []byte(value), 0o644)
}

func (f fileTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	b, err := os.ReadFile(filepath.Join(f.d.Path(), object))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", 0, err
	}
	mark, err := f.d.Watermark(object)
	return string(b), mark, err
}

// twoDirsTarget streams with Write through two Dir values on the same
// directory, chosen by the token's parity: their flocks are on separate open
// file descriptions, as two processes' would be.
type twoDirsTarget struct{ d [2]*filefence.Dir }

func (tt twoDirsTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return tt.d[t%2].Write(ctx, object, t, 0o644, func(w io.Writer) error {
		half := len(value) / 2
		if _, err := io.WriteString(w, value[:half]); err != nil {
			return err
		}
		_, err := io.WriteString(w, value[half:])
		return err
	})
}

func (tt twoDirsTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	return fileTarget{tt.d[0]}.Read(ctx, object)
}

func TestDir_Conformance(t *testing.T) {
	t.Run("WriteFile", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target { return fileTarget{openDir(t, t.TempDir())} })
	})
	t.Run("DoAppend", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target {
			path := t.TempDir()
			return doTarget{[2]*filefence.Dir{openDir(t, path), openDir(t, path)}}
		})
	})
	t.Run("TwoDirsStreaming", func(t *testing.T) {
		guardtest.Run(t, func(t *testing.T) guardtest.Target {
			path := t.TempDir()
			return twoDirsTarget{[2]*filefence.Dir{openDir(t, path), openDir(t, path)}}
		})
	})
}

func TestDir_Remove(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.WriteFile(ctx(t), "out", 5, []byte("v5"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStale(t, d.Remove(ctx(t), "out", 3), 3, 5)
	if got := readFile(t, filepath.Join(path, "out")); got != "v5" {
		t.Fatalf("after a stale Remove the file holds %q, want v5", got)
	}
	if err := d.Remove(ctx(t), "out", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path, "out")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file still there after Remove: %v", err)
	}
	wantMark(t, d, "out", 7)
	// The watermark survives the removal: a stale writer cannot recreate
	// the file.
	wantStale(t, d.WriteFile(ctx(t), "out", 6, []byte("stale"), 0o644), 6, 7)
	if _, err := os.Stat(filepath.Join(path, "out")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a stale write recreated the removed file")
	}
	// Removing a missing file is not an error, and raises the watermark.
	if err := d.Remove(ctx(t), "never", 9); err != nil {
		t.Fatal(err)
	}
	wantMark(t, d, "never", 9)
}

func TestDir_Check(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.Check(ctx(t), "out", 12); err != nil {
		t.Fatal(err)
	}
	wantMark(t, d, "out", 12)
	if _, err := os.Stat(filepath.Join(path, "out")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Check created the file")
	}
	wantStale(t, d.Check(ctx(t), "out", 11), 11, 12)
	wantStale(t, d.WriteFile(ctx(t), "out", 11, nil, 0o644), 11, 12)
}

// ops are the Dir's fenced calls.
var ops = []struct {
	name string
	do   func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error
}{
	{"WriteFile", func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error {
		return d.WriteFile(ctx, name, t, []byte("changed"), 0o644)
	}},
	{"Write", func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error {
		return d.Write(ctx, name, t, 0o644, func(w io.Writer) error {
			_, err := io.WriteString(w, "changed")
			return err
		})
	}},
	{"Remove", func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error {
		return d.Remove(ctx, name, t)
	}},
	{"Check", func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error {
		return d.Check(ctx, name, t)
	}},
	{"Do", func(ctx context.Context, d *filefence.Dir, name string, t fence.Token) error {
		return d.Do(ctx, name, t, func(ctx context.Context) error {
			return d.WriteFile(ctx, name, t, []byte("changed"), 0o644)
		})
	}},
}

func TestDir_InvalidTokens(t *testing.T) {
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			path := t.TempDir()
			d := openDir(t, path)
			if err := d.WriteFile(ctx(t), "out", 10, []byte("orig"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, path)
			for _, tok := range []fence.Token{0, fence.MaxToken + 1, ^fence.Token(0)} {
				if err := op.do(ctx(t), d, "out", tok); !errors.Is(err, fence.ErrInvalidToken) {
					t.Errorf("%s(token %d)=%v, want fence.ErrInvalidToken", op.name, uint64(tok), err)
				}
				if !sameSnapshot(before, snapshot(t, path)) {
					t.Fatalf("%s(token %d) changed the directory: %v -> %v", op.name, uint64(tok), before, snapshot(t, path))
				}
			}
		})
	}
}

func TestDir_InvalidNames(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.WriteFile(ctx(t), "ok", 10, []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, path)
	bad := []string{
		"", ".", "..", "a/b", "/etc/passwd", "../escape", "sub/", "nul\x00byte",
		".fence", ".fence/ok.token", ".fence-tmp-x", ".fenced", strings.Repeat("n", filefence.MaxNameLen+1),
	}
	for _, name := range bad {
		for _, op := range ops {
			if err := op.do(ctx(t), d, name, 20); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Errorf("%s(%q)=%v, want fence.ErrInvalidArgument", op.name, name, err)
			}
		}
		if _, err := d.Watermark(name); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Watermark(%q)=%v, want fence.ErrInvalidArgument", name, err)
		}
	}
	if after := snapshot(t, path); !sameSnapshot(before, after) {
		t.Fatalf("invalid names changed the directory: %v -> %v", before, after)
	}
	for _, name := range []string{"a", "report.csv", "..a", "a..", ".hidden", "ünïcødé ✓", "a.lock", "a.token", strings.Repeat("n", filefence.MaxNameLen)} {
		if err := d.WriteFile(ctx(t), name, 1, []byte(name), 0o644); err != nil {
			t.Errorf("WriteFile(%q)=%v, want accepted", name, err)
		} else if got := readFile(t, filepath.Join(path, name)); got != name {
			t.Errorf("file %q holds %q", name, got)
		}
	}
	// Names whose sidecar files look alike keep separate watermarks.
	if err := d.WriteFile(ctx(t), "a", 50, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMark(t, d, "a.lock", 1)
	wantMark(t, d, "a.token", 1)
}

func TestDir_Issuer(t *testing.T) {
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			path := t.TempDir()
			d := openDir(t, path, filefence.WithIssuer("cluster-a"))
			before := snapshot(t, path)
			for _, c := range []context.Context{ctx(t), guard.ContextWithIssuer(ctx(t), "cluster-b")} {
				if err := op.do(c, d, "out", 5); !errors.Is(err, fence.ErrIssuerMismatch) {
					t.Fatalf("%s with issuer %q=%v, want fence.ErrIssuerMismatch", op.name, guard.IssuerFromContext(c), err)
				}
				if !sameSnapshot(before, snapshot(t, path)) {
					t.Fatalf("%s with issuer %q changed the directory", op.name, guard.IssuerFromContext(c))
				}
			}
			if err := op.do(guard.ContextWithIssuer(ctx(t), "cluster-a"), d, "out", 5); err != nil {
				t.Fatalf("%s with the pinned issuer=%v", op.name, err)
			}
			wantMark(t, d, "out", 5)
		})
	}
}

func TestDir_WriteFailsChangesNothing(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.WriteFile(ctx(t), "out", 5, []byte("v5"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, path)
	boom := errors.New("boom")
	err := d.Write(ctx(t), "out", 9, 0o644, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write=%v, want the callback's error", err)
	}
	if after := snapshot(t, path); !sameSnapshot(before, after) {
		t.Fatalf("a failed write changed the directory: %v -> %v", before, after)
	}

	// A stale token is rejected before the callback runs.
	called := false
	err = d.Write(ctx(t), "out", 4, 0o644, func(w io.Writer) error { called = true; return nil })
	wantStale(t, err, 4, 5)
	if called {
		t.Fatal("Write called the callback for a stale token")
	}

	// A name that is a directory is refused before the watermark moves.
	if err := os.Mkdir(filepath.Join(path, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, path)
	for _, op := range ops[:3] {
		if err := op.do(ctx(t), d, "sub", 3); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("%s on a directory=%v, want fence.ErrInvalidArgument", op.name, err)
		}
	}
	if after := snapshot(t, path); !sameSnapshot(before, after) {
		t.Fatalf("writes to a directory's name changed the directory: %v -> %v", before, after)
	}
}

func TestDir_CorruptWatermark(t *testing.T) {
	for _, bad := range []string{"abc\n", "0\n", "007\n", "5", "9223372036854775808\n", "", "5\n5\n"} {
		path := t.TempDir()
		d := openDir(t, path)
		if err := d.WriteFile(ctx(t), "out", 5, []byte("v5"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, filefence.SidecarDir, "out.token"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := d.WriteFile(ctx(t), "out", 9, []byte("v9"), 0o644); !errors.Is(err, filefence.ErrCorruptWatermark) {
			t.Errorf("WriteFile over watermark %q=%v, want ErrCorruptWatermark", bad, err)
		}
		if err := d.Check(ctx(t), "out", 9); !errors.Is(err, filefence.ErrCorruptWatermark) {
			t.Errorf("Check over watermark %q=%v, want ErrCorruptWatermark", bad, err)
		}
		if got := readFile(t, filepath.Join(path, "out")); got != "v5" {
			t.Errorf("file holds %q after a refused write, want v5", got)
		}
	}
}

func TestOpen_Errors(t *testing.T) {
	path := t.TempDir()
	if _, err := filefence.Open(filepath.Join(path, "missing")); err == nil {
		t.Error("Open of a missing directory succeeded")
	}
	file := filepath.Join(path, "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := filefence.Open(file); err == nil {
		t.Error("Open of a file succeeded")
	}
	bad := filepath.Join(path, "bad")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, filefence.SidecarDir), nil, 0o644)
	if _, err := filefence.Open(bad); err == nil {
		t.Error("Open with a file named .fence succeeded")
	}
}

func TestDir_Path(t *testing.T) {
	path := t.TempDir()
	if got := openDir(t, path).Path(); got != path {
		t.Fatalf("Path()=%q, want %q", got, path)
	}
}

// TestDir_ConcurrentNames writes many names at once: each has its own lock
// and watermark.
func TestDir_ConcurrentNames(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := string(rune('a' + i))
			for tok := fence.Token(1); tok <= 20; tok++ {
				if err := d.WriteFile(ctx(t), name, tok, []byte(tok.String()), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	bounded.Wait(t, "writers", time.Minute, &wg)
	for i := range 8 {
		name := string(rune('a' + i))
		wantMark(t, d, name, 20)
		if got := readFile(t, filepath.Join(path, name)); got != "20" {
			t.Errorf("%s holds %q, want 20", name, got)
		}
	}
	if tmp := tempFiles(t, path); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
}
