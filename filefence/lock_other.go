//go:build !unix

package filefence

import (
	"errors"
	"os"
)

// tryLock is not implemented where there is no flock.
func tryLock(f *os.File) (bool, error) {
	return false, errors.ErrUnsupported
}
