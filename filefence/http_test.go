package filefence_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
)

// TestDir_HTTP serves the files of a directory behind the httpfence
// middleware with a Dir: the handler's WriteFile runs under the lock the
// Dir's step holds.
func TestDir_HTTP(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	httpfencetest.Run(t, httpfencetest.Resource{
		Guard: d,
		Write: func(ctx context.Context, object string, t fence.Token, value string) error {
			return d.WriteFile(ctx, object, t, []byte(value), 0o644)
		},
		Read: func(ctx context.Context, object string) (string, error) {
			b, err := os.ReadFile(filepath.Join(path, object))
			if errors.Is(err, fs.ErrNotExist) {
				return "", nil
			}
			return string(b), err
		},
	})
}
