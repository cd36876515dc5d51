package outbox

import (
	"errors"
	"fmt"
)

// Errors of this package. Check them with errors.Is. Stale tokens are
// reported as *fence.StaleTokenError (errors.Is(err, fence.ErrStaleToken)),
// tokens out of range with an error matching fence.ErrInvalidToken.
var (
	// ErrAlreadyRunning reports that another dispatcher holds the outbox's
	// advisory lock (AdvisoryLockKey) in this database. Only one may run.
	ErrAlreadyRunning = errors.New("outbox: another dispatcher is running")
	// ErrNotFound reports an outbox entry that does not exist.
	ErrNotFound = errors.New("outbox: entry not found")
)

// Permanent marks a delivery error as permanent: the dispatcher records the
// command as failed (StateFailed, with the error as the reason) and moves
// on to the next one instead of retrying it. Return it from
// Dispatcher.Deliver for errors that no retry can heal, such as a request
// the receiver rejects as invalid. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

// Error implements error.
func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }

// Unwrap returns the error Permanent was given.
func (e *permanentError) Unwrap() error { return e.err }

// isPermanent reports whether err was marked with Permanent.
func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("outbox: "+format, args...)
}
