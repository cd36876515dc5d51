// Package durable writes small files so that they survive a crash or a
// power loss whole: either the old content or the new one, never a mix.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data atomically and durably: a temporary
// file in the same directory (created with mode 0600) is written and
// fsynced, renamed over path, and the directory fsynced. It returns only
// once all of that is done; on error path keeps its old content.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, so that the files created in it,
// renamed into it or removed from it are so after a crash too.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
