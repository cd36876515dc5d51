package client

import (
	"errors"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// A LockOption configures an acquire of a lock (NewMutex, Client.Acquire).
type LockOption func(*lockOptions)

type lockOptions struct {
	lockDelayMs *int64
	err         error
}

// WithLockDelay sets the grant's lock delay: when its session expires or
// is revoked (never after an Unlock, Release or Close), the server grants
// the lock to no one for d, so a holder cut off in the middle of its work
// has d longer to stop before the next holder starts. 0 asks for none;
// without the option the server's default applies (fenced serve
// --lock-delay, off unless set). d is at most fence.MaxLockDelay and is rounded
// down to milliseconds.
//
// It is a mitigation for resources that cannot check fencing tokens, not a
// safety mechanism: a holder paused for longer than its TTL plus d still
// writes late. Only the token check at the resource keeps such a write
// out.
func WithLockDelay(d time.Duration) LockOption {
	return func(o *lockOptions) {
		if err := fence.ValidateLockDelay(d); err != nil {
			o.err = err
			return
		}
		ms := d.Milliseconds()
		o.lockDelayMs = &ms
	}
}

func lockOptionsOf(opts []LockOption) (lockOptions, error) {
	var o lockOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o, o.err
}

// ErrLockDelayed is wrapped, with fence.ErrNotGranted, by the error of a
// try that found the lock in its lock delay: free, but granted to no one
// until the delay after its last holder's expiry or revocation ends.
var ErrLockDelayed = errors.New("client: lock in its lock delay after its holder expired or was revoked")

// notGrantedReason says why an acquire was not granted: the lock delay
// after its last holder expired, or the holder, whose session a server
// with an auth file names only to identities that may read the lock (0
// otherwise).
func notGrantedReason(r *fencedv1.AcquireResponse) error {
	switch {
	case r.GetDelayed():
		return ErrLockDelayed
	case r.GetHolder() == 0:
		return errors.New("held by a session the server did not name (with an auth file it names it only to identities with read on the lock)")
	}
	return fmt.Errorf("held by session %d", r.GetHolder())
}
