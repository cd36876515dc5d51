package filefence

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	fence "github.com/fenced-dev/fenced"
)

// WriteFile replaces the file name with data when t is not below name's
// watermark, and raises the watermark to t. It is Write with a function
// that writes data.
func (d *Dir) WriteFile(ctx context.Context, name string, t fence.Token, data []byte, perm fs.FileMode) error {
	return d.Write(ctx, name, t, perm, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	})
}

// Write replaces the file name with what write writes, when t is not below
// name's watermark, and raises the watermark to t.
//
// write streams the content into a new temporary file in the directory
// (unbuffered: wrap w in a bufio.Writer for small writes); the file is
// synced, then, under the exclusive lock of name, the token is checked,
// the watermark raised durably, the file renamed into place and the
// directory synced. Readers see the old file or the new one, never a part.
// The new file has mode perm (before the umask), as a file that
// os.WriteFile creates.
//
// A token already below the watermark is rejected before write is called.
// If write returns an error, or ctx is done before the lock is taken,
// nothing changes. An error after the lock was taken (a failed rename or
// directory sync) may leave the watermark raised with the file unchanged,
// or, for a failed sync, the file replaced but not yet durable; the write
// can be retried with the same token.
//
// Called with the context of a Do's apply for the same name, Write runs
// under the lock that Do holds instead of waiting for it.
func (d *Dir) Write(ctx context.Context, name string, t fence.Token, perm fs.FileMode, write func(w io.Writer) error) error {
	if err := d.admit(ctx, name, t); err != nil {
		return err
	}
	// Fail fast: a writer that lost its lock does not write its data first.
	mark, err := d.readMark(name)
	if err != nil {
		return err
	}
	if _, err := fence.Decide(name, mark, t); err != nil {
		return err
	}

	tmp, f, err := d.createTemp(perm)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			d.root.Remove(tmp)
		}
		f.Close() // releases the temporary file's lock, after the rename
	}()
	if err := write(struct{ io.Writer }{f}); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("filefence: write %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.commit(ctx, name, t, func() error {
		return d.notDir(name)
	}, func(context.Context) error {
		if err := d.root.Rename(tmp, name); err != nil {
			return fmt.Errorf("filefence: write %q: %w", name, err)
		}
		renamed = true
		return d.syncDir(".")
	})
}

// Remove removes the file name when t is not below name's watermark, and
// raises the watermark to t. Removing a name that does not exist is not an
// error, and raises the watermark too.
//
// The watermark is kept, so a writer with an older token cannot create the
// file again. Called with the context of a Do's apply for the same name,
// Remove runs under the lock that Do holds.
func (d *Dir) Remove(ctx context.Context, name string, t fence.Token) error {
	return d.commit(ctx, name, t, func() error {
		return d.notDir(name)
	}, func(context.Context) error {
		if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filefence: remove %q: %w", name, err)
		}
		return d.syncDir(".")
	})
}

// notDir refuses a name that is a directory, before the watermark is
// raised.
func (d *Dir) notDir(name string) error {
	if fi, err := d.root.Lstat(name); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %q is a directory; a Dir writes and removes files only", fence.ErrInvalidArgument, name)
	}
	return nil
}

// createTemp creates a new temporary file in the directory and locks it, so
// that CleanTemp can tell it from the leftover of a writer that died.
func (d *Dir) createTemp(perm fs.FileMode) (string, *os.File, error) {
	for attempt := 0; ; attempt++ {
		tmp := tempPrefix + rand.Text()
		f, err := d.root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			if errors.Is(err, fs.ErrExist) && attempt < 3 {
				continue
			}
			return "", nil, fmt.Errorf("filefence: create temporary file: %w", err)
		}
		// CleanTemp may have taken the lock between the creation and now,
		// and removed the file: then start over with a new one.
		ok, err := tryLock(f)
		if err == nil && ok && d.sameFile(tmp, f) {
			return tmp, f, nil
		}
		f.Close()
		if err != nil {
			d.root.Remove(tmp)
			return "", nil, fmt.Errorf("filefence: lock temporary file: %w", err)
		}
		if attempt >= 100 {
			return "", nil, fmt.Errorf("filefence: create temporary file: removed by a concurrent cleaner %d times", attempt+1)
		}
	}
}

// sameFile reports whether the directory entry name is the open file f.
func (d *Dir) sameFile(name string, f *os.File) bool {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return false
	}
	ffi, err := f.Stat()
	return err == nil && os.SameFile(fi, ffi)
}

// CleanTemp removes the temporary files of writers that died while writing
// and returns how many it removed. A writer holds a lock on its temporary
// file until the file is renamed into place or removed, and the lock dies
// with the process, so an unlocked temporary file is a leftover. Open calls
// CleanTemp; a long-lived Dir may call it from time to time. Leftovers are
// never mistaken for data: their names (".fence-tmp-...") are not valid
// names.
func (d *Dir) CleanTemp() (int, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return 0, fmt.Errorf("filefence: clean: %w", err)
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("filefence: clean: %w", err)
	}
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		ok, err := d.removeIfUnlocked(e.Name())
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	if removed > 0 {
		return removed, d.syncDir(".")
	}
	return removed, nil
}

// removeIfUnlocked removes the temporary file name if no writer holds its
// lock.
func (d *Dir) removeIfUnlocked(name string) (bool, error) {
	f, err := d.root.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // renamed into place or removed meanwhile
	}
	if errors.Is(err, fs.ErrPermission) {
		return false, nil // a file this process may not read (perm 0): left alone
	}
	if err != nil {
		return false, fmt.Errorf("filefence: clean %q: %w", name, err)
	}
	defer f.Close()
	ok, err := tryLock(f)
	if err != nil || !ok {
		return false, err
	}
	// Holding the lock, the writer is gone; the name is still this file
	// unless it was renamed into place just before the lock was free.
	if !d.sameFile(name, f) {
		return false, nil
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("filefence: clean %q: %w", name, err)
	}
	return true, nil
}
