package durable_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fenced-dev/fenced/internal/durable"
)

// WriteFile creates the file and its directory, replaces its content, and
// leaves no temporary file behind.
func TestWriteFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first\n", "second\n"} {
		if err := durable.WriteFile(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("dir holds %v (%v), want only f", entries, err)
	}
}

// On error the old content stays: a path whose parent is a file cannot be
// written.
func TestWriteFile_Error(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := durable.WriteFile(filepath.Join(file, "child"), []byte("y")); err == nil {
		t.Fatal("WriteFile under a file succeeded")
	}
}
