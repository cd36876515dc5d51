package fence

import (
	"fmt"
	"time"
)

// MaxLockDelay is the longest lock delay a grant may ask for: after the
// session holding the grant expires or is revoked, its lock is granted to
// no one for that long (docs/lock-delay.md). A mitigation for resources
// that cannot check tokens, not a safety mechanism.
const MaxLockDelay = time.Minute

// ValidateLockDelay checks that a lock delay is within 0..MaxLockDelay (0:
// none).
func ValidateLockDelay(d time.Duration) error {
	if d < 0 || d > MaxLockDelay {
		return fmt.Errorf("%w: lock delay must be between 0 (none) and %s, got %v", ErrInvalidArgument, shortDuration(MaxLockDelay), d)
	}
	return nil
}

// ValidateLockDelayMillis is ValidateLockDelay for milliseconds, checked
// before any conversion.
func ValidateLockDelayMillis(ms int64) error {
	if ms < 0 || ms > MaxLockDelay.Milliseconds() {
		return fmt.Errorf("%w: lock delay must be between 0 (none) and %s, got %dms", ErrInvalidArgument, shortDuration(MaxLockDelay), ms)
	}
	return nil
}
