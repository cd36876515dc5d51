package filefence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// SidecarDir is the directory inside a fenced directory that holds the
// watermarks and the lock files. Names starting with ".fence" are reserved:
// they cannot be written through a Dir.
const SidecarDir = ".fence"

// MaxNameLen is the longest file name a Dir accepts, in bytes. It leaves
// room for the suffixes of the sidecar files within the 255 bytes most file
// systems allow.
const MaxNameLen = 240

// tempPrefix starts the names of data files being written. They live in the
// fenced directory itself, so that the final rename stays within one file
// system, and can never be a valid name.
const tempPrefix = ".fence-tmp-"

// Sidecar file suffixes, per name: the lock file (never renamed or
// removed, so every writer locks the same inode), the watermark and the
// watermark being replaced.
const (
	lockSuffix     = ".lock"
	markSuffix     = ".token"
	markTempSuffix = ".token-tmp"
)

// ErrCorruptWatermark reports a watermark file that does not hold a token
// (1 to fence.MaxToken in decimal, then a newline): it was written by
// someone else. Every write to that name fails until the file is repaired
// by hand; the Dir never guesses.
var ErrCorruptWatermark = errors.New("filefence: watermark file does not hold a token")

// Dir is a directory whose files are written with fencing tokens. For each
// file name it keeps a watermark, the highest token accepted for that
// name, in SidecarDir, and it accepts a write, a removal or a check only
// when the token is not below the watermark, raising the watermark in the
// same step. The step is made under an exclusive flock on a per-name lock
// file, so it is atomic against every other Dir on the same directory, in
// this process or any other, on the same machine.
//
// A Dir is safe for concurrent use. Its methods reject a token outside
// 1..fence.MaxToken with an error matching fence.ErrInvalidToken, a stale
// token with a *fence.StaleTokenError (matching fence.ErrStaleToken), an
// invalid name with fence.ErrInvalidArgument and, with WithIssuer, a token
// of another issuer with fence.ErrIssuerMismatch; in all these cases
// nothing changes. A Dir is a fence.Guard (Do), so the httpfence
// middleware and the grpcfence interceptors take it directly, the file name
// being the object.
type Dir struct {
	root   *os.Root
	issuer string
}

var _ fence.Guard = (*Dir)(nil)

// Option configures a Dir.
type Option func(*Dir)

// WithIssuer pins the Dir to the fenced cluster with the given issuer ID:
// every write, removal and check first checks, with guard.CheckIssuer, that
// the issuer presented in its context (guard.ContextWithIssuer) is id, and
// fails with an error matching fence.ErrIssuerMismatch otherwise. An empty
// id accepts every issuer, as without the option.
func WithIssuer(id string) Option {
	return func(d *Dir) { d.issuer = id }
}

// Open opens the existing directory dir for fenced writes. It creates
// SidecarDir inside it when missing and removes the temporary files of
// writers that died (see CleanTemp). Close the Dir when done.
//
// Every process that writes to dir must go through a Dir: a plain write
// bypasses the watermark. Readers read the files as usual; a file is always
// either its old or its new content, never a mix.
func Open(dir string, opts ...Option) (*Dir, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("filefence: open %s: %w", dir, err)
	}
	d := &Dir{root: root}
	for _, opt := range opts {
		opt(d)
	}
	if err := root.Mkdir(SidecarDir, 0o777); err == nil {
		if err := d.syncDir("."); err != nil {
			root.Close()
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrExist) {
		root.Close()
		return nil, fmt.Errorf("filefence: create %s: %w", filepath.Join(dir, SidecarDir), err)
	}
	if fi, err := root.Lstat(SidecarDir); err != nil || !fi.IsDir() {
		root.Close()
		return nil, fmt.Errorf("filefence: %s is not a directory", filepath.Join(dir, SidecarDir))
	}
	if _, err := d.CleanTemp(); err != nil {
		root.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory; calls made after it fail.
func (d *Dir) Close() error { return d.root.Close() }

// Path returns the directory's path as given to Open: readers find the
// file name at filepath.Join(d.Path(), name).
func (d *Dir) Path() string { return d.root.Name() }

// ValidateName checks that name can be written through a Dir: 1 to
// MaxNameLen bytes, not "." or "..", no "/" and no NUL byte, and not
// starting with ".fence" (reserved for SidecarDir and temporary files).
// The error wraps fence.ErrInvalidArgument and says what is allowed.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: file name is empty", fence.ErrInvalidArgument)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: file name is %d bytes, longer than %d", fence.ErrInvalidArgument, len(name), MaxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w: file name %q is not a file in the directory", fence.ErrInvalidArgument, name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w: file name %q has a path separator or NUL; want a name within the directory", fence.ErrInvalidArgument, name)
	case strings.HasPrefix(name, SidecarDir):
		return fmt.Errorf("%w: file name %q starts with %q, which is reserved for the fence's own files", fence.ErrInvalidArgument, name, SidecarDir)
	}
	return nil
}

// Watermark returns the highest token accepted for name, or 0 when none has
// been.
func (d *Dir) Watermark(name string) (fence.Token, error) {
	if err := ValidateName(name); err != nil {
		return 0, err
	}
	return d.readMark(name)
}

// Do implements fence.Guard for the file name object: under the name's
// exclusive lock it applies the watermark rule to t, raises the watermark
// durably when t is above it, and then runs apply with a context that holds
// the lock. A stale token is rejected before apply is called.
//
// What apply may do: anything that must not interleave with another fenced
// step for the same name, in this process or another. Write, WriteFile and
// Remove of this Dir called with apply's context for the same name run
// under the lock already held (they do not wait for it), apply the rule to
// their own token and make their change, so
//
//	err := d.Do(ctx, "daily.csv", t, func(ctx context.Context) error {
//		data, err := render(ctx)
//		if err != nil {
//			return err
//		}
//		return d.WriteFile(ctx, "daily.csv", t, data, 0o644)
//	})
//
// renders and publishes as one fenced step; it is how a handler behind the
// httpfence middleware or the grpcfence interceptors writes its file. Such
// nested calls from goroutines apply started run one at a time; apply must
// wait for them before it returns. A call for another name takes that
// name's lock as usual (two steps that take two names' locks in opposite
// orders can deadlock until their contexts end).
//
// The watermark is raised before apply runs, so that after a crash it is
// at least the token of anything apply may have written. When apply
// returns an error Do returns it unchanged and the raised watermark stays:
// files are not transactional, so the Dir cannot undo what apply wrote,
// and keeping the watermark only makes older tokens fail, the exception
// fence.Guard allows. A nil apply makes Do a bare check (Check).
//
// The lock is flock(2) on .fence/NAME.lock (see the package
// documentation); Do waits for it until ctx is done. Errors are those of
// Dir: an invalid name, token or issuer is refused before the lock is
// taken (guard.Admit).
func (d *Dir) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	return d.commit(ctx, object, t, nil, apply)
}

// Check applies the watermark rule to the file name object and raises its
// watermark, without touching the file: Do without an apply.
func (d *Dir) Check(ctx context.Context, object string, t fence.Token) error {
	return d.Do(ctx, object, t, nil)
}

// admit runs the checks that need no lock: issuer, token and name.
func (d *Dir) admit(ctx context.Context, name string, t fence.Token) error {
	return guard.Admit(ctx, d.issuer, name, t, ValidateName)
}

// commit is the fenced step of Do, Write and Remove. Under the exclusive
// lock of name (taken here, or already held by an enclosing step whose
// context ctx is) it runs precheck (which may refuse the change and must
// only read), applies the watermark rule, raises the watermark durably
// when t is above it, and only then runs apply with a context that holds
// the lock. Raising first means that after a crash at any point the
// watermark is at least the token of every change that may have reached
// the disk.
func (d *Dir) commit(ctx context.Context, name string, t fence.Token, precheck func() error, apply func(ctx context.Context) error) error {
	if err := d.admit(ctx, name, t); err != nil {
		return err
	}
	if precheck != nil {
		// Once without the lock, so that a refused call leaves no lock file
		// behind; again under the lock, where it counts.
		if err := precheck(); err != nil {
			return err
		}
	}
	var unlock func()
	if h := heldFrom(ctx, d, name); h != nil && h.enter() {
		unlock = h.mu.Unlock // nested in a step that holds the lock
	} else {
		var err error
		if unlock, err = d.lock(ctx, name); err != nil {
			return err
		}
	}
	h := &held{d: d, name: name, outer: ctx.Value(heldKey{})}
	defer func() {
		h.release()
		unlock()
	}()
	return d.step(context.WithValue(ctx, heldKey{}, h), name, t, precheck, apply)
}

// step is the part of commit made under the lock of name.
func (d *Dir) step(ctx context.Context, name string, t fence.Token, precheck func() error, apply func(ctx context.Context) error) error {
	mark, err := d.readMark(name)
	if err != nil {
		return err
	}
	next, err := fence.Decide(name, mark, t)
	if err != nil {
		return err
	}
	if precheck != nil {
		if err := precheck(); err != nil {
			return err
		}
	}
	if next != mark {
		if err := d.writeMark(name, next); err != nil {
			return err
		}
	}
	if apply != nil {
		return apply(ctx)
	}
	return nil
}

// lock takes the exclusive lock of name, waiting until ctx is done. The
// returned function releases it.
func (d *Dir) lock(ctx context.Context, name string) (func(), error) {
	f, err := d.root.OpenFile(SidecarDir+"/"+name+lockSuffix, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("filefence: lock %q: %w", name, err)
	}
	delay := 50 * time.Microsecond
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("filefence: lock %q: %w", name, err)
		}
		if ok {
			// Closing the file releases the lock.
			return func() { f.Close() }, nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			f.Close()
			return nil, fmt.Errorf("filefence: lock %q: %w", name, ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, 5*time.Millisecond)
	}
}

// readMark reads the watermark of name, 0 when it has none.
func (d *Dir) readMark(name string) (fence.Token, error) {
	b, err := d.root.ReadFile(SidecarDir + "/" + name + markSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("filefence: read watermark of %q: %w", name, err)
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	t, err := fence.ParseToken(s)
	if !ok || err != nil || t.String() != s {
		return 0, fmt.Errorf("%w: %s holds %q", ErrCorruptWatermark, filepath.Join(d.Path(), SidecarDir, name+markSuffix), b)
	}
	return t, nil
}

// writeMark replaces the watermark of name with t: write a temporary file,
// sync it, rename it over the watermark, sync SidecarDir. It runs under the
// lock of name, so the temporary file's name is fixed.
func (d *Dir) writeMark(name string, t fence.Token) error {
	tmp := SidecarDir + "/" + name + markTempSuffix
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return fmt.Errorf("filefence: write watermark of %q: %w", name, err)
	}
	_, err = f.WriteString(t.String() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.root.Rename(tmp, SidecarDir+"/"+name+markSuffix)
	}
	if err != nil {
		return fmt.Errorf("filefence: write watermark of %q: %w", name, err)
	}
	return d.syncDir(SidecarDir)
}

// syncDir makes the entries of a directory (renames, creations, removals)
// durable.
func (d *Dir) syncDir(name string) error {
	f, err := d.root.Open(name)
	if err != nil {
		return fmt.Errorf("filefence: sync directory: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("filefence: sync directory: %w", err)
	}
	return nil
}
