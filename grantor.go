package fence

import (
	"context"
	"errors"
	"time"
)

// Grantor issues exclusive, fenced grants for named resources from one
// store: the fenced server (client.NewGrantor), or a database a team
// already runs (pggrant for PostgreSQL, and the Redis grantor). Code
// written against Grantor and Held moves from one store to another by
// changing the constructor alone; docs/library-mode.md says what each
// store can and cannot promise.
//
// Every grant carries a fencing token above every token the same issuer
// issued before for the name. A grant lives for its TTL from when the
// store granted or last renewed it; the grantor renews it in the
// background (every TTL/3) while it is held. Its validity, measured on
// the holder's monotonic clock, is a liveness signal only: a paused
// process cannot act on it, and only the token check at the resource (a
// Guard) keeps a late write out.
//
// Implementations are safe for concurrent use. Each Acquire is a holder
// of its own: two Acquires of one name from one Grantor exclude each
// other like two processes do.
type Grantor interface {
	// Acquire acquires the exclusive grant of name. Without Wait it does
	// not wait: when another holder has name, it returns an error wrapping
	// ErrNotGranted. With Wait it waits until granted or ctx ends; a
	// waiter is woken by the store when the name is released or expires,
	// not by polling. A name that fails ValidateName or a TTL outside
	// MinTTL..MaxTTL is an error wrapping ErrInvalidArgument, and nothing
	// is written. An Acquire that fails leaves no grant behind (a grant
	// the store made but whose answer was lost is released, or left to
	// its TTL when the store cannot be reached).
	Acquire(ctx context.Context, name string, opts ...AcquireOption) (Held, error)
}

// Held is a grant being held: what Grantor.Acquire returns. Its methods
// are safe to call from any goroutine.
type Held interface {
	// Grant returns the grant: Name, Kind (KindLock), Scope (the name),
	// Token, Issuer (which tokens are comparable with this one), TTL and
	// IssuedAt (the store's clock, for display only). It does not change
	// while held: renewals keep the token.
	Grant() Grant
	// Release ends the grant. Context is cancelled first, with
	// ErrReleased as its cause, so that work under it stops before the
	// next holder can start. It reports what the store found: Released
	// (this call ended the grant), AlreadyReleased (it had ended before:
	// an earlier Release, or its TTL ran out, and no other holder has the
	// name) or NotOwned (it had ended and another holder has the name
	// now). Nothing else is changed in either of the last two cases. An
	// error means the outcome is unknown; the grant then ends with its TTL
	// at the latest.
	Release(ctx context.Context) (ReleaseResult, error)
	// Verify asks the store whether this grant is still the name's
	// current grant. It returns nil if so, and an error wrapping
	// ErrLockLost if not. It is a point-in-time answer, not a guarantee
	// for the next write: the resource's token check is.
	Verify(ctx context.Context) error
	// Renew renews the grant now, keeping its token, and waits for the
	// store's answer (the grantor also renews in the background). It
	// returns an error wrapping ErrLockLost, and ends the grant (Done,
	// Context), when the store no longer has it; other errors (the store
	// unreachable) leave it held until its validity runs out.
	Renew(ctx context.Context) error
	// ValidUntil returns the monotonic time until which the holder trusts
	// the grant without a further confirmed renewal: sent + TTL - margin,
	// from just before the request that granted or last renewed it was
	// sent. The margin is DefaultMargin(TTL) unless the grantor says
	// otherwise.
	ValidUntil() time.Time
	// Remaining returns ValidUntil minus now on the monotonic clock, or 0
	// once it has passed.
	Remaining() time.Duration
	// Jeopardy returns a channel closed when a renewal that should have
	// been confirmed by now was not (the grant is still valid until
	// ValidUntil; expect to lose it), and also when the grant ends. After
	// a recovery, later calls return a new, open channel.
	Jeopardy() <-chan struct{}
	// Done returns a channel closed when the grant ends: released, its
	// validity ran out, or the store reported it gone. It closes at
	// ValidUntil at the latest, even when the store cannot be reached.
	Done() <-chan struct{}
	// Context returns a context for the work done under the grant,
	// cancelled when Done closes, with Err as its cause.
	Context() context.Context
	// Err returns nil while the grant is held, and why it ended once Done
	// is closed: ErrReleased after Release, an error wrapping ErrLockLost
	// when it was lost.
	Err() error
}

// ReleaseResult is the outcome of a release, as the store found it.
type ReleaseResult string

// The outcomes of a release.
const (
	// Released means the holder had the grant and the release ended it.
	Released ReleaseResult = "released"
	// AlreadyReleased means the grant had ended before (released, or its
	// TTL ran out) and no other holder has the name; nothing changed.
	AlreadyReleased ReleaseResult = "already_released"
	// NotOwned means another holder has the name; nothing changed.
	NotOwned ReleaseResult = "not_owned"
)

// ErrReleased is the Err of a Held after Release, and the cause of its
// Context.
var ErrReleased = errors.New("fence: grant released")

// DefaultGrantTTL is the TTL of a grant acquired without WithTTL.
const DefaultGrantTTL = 15 * time.Second

// An AcquireOption configures one Grantor.Acquire.
type AcquireOption func(*AcquireOptions)

// AcquireOptions are the options of one Acquire, as AcquireOptionsOf
// collects them for a Grantor's implementation.
type AcquireOptions struct {
	// Wait makes Acquire wait until granted or its context ends.
	Wait bool
	// TTL is the grant's time to live: how long the store keeps it after
	// it was granted or last renewed. DefaultGrantTTL unless set.
	TTL time.Duration
}

// Wait makes Acquire wait for the grant, woken by the store, until it is
// granted or the context ends; without it Acquire returns ErrNotGranted
// at once when another holder has the name.
func Wait() AcquireOption { return func(o *AcquireOptions) { o.Wait = true } }

// WithTTL sets the grant's TTL, within MinTTL..MaxTTL (default
// DefaultGrantTTL). The grantor renews the grant every TTL/3 while it is
// held; the store ends it TTL after the last renewal it applied.
func WithTTL(ttl time.Duration) AcquireOption { return func(o *AcquireOptions) { o.TTL = ttl } }

// AcquireOptionsOf applies opts to the defaults and validates the result:
// an error wrapping ErrInvalidArgument for a TTL out of range.
func AcquireOptionsOf(opts ...AcquireOption) (AcquireOptions, error) {
	o := AcquireOptions{TTL: DefaultGrantTTL}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := ValidateTTL(o.TTL); err != nil {
		return o, err
	}
	return o, nil
}

// DefaultMargin is how much earlier than the store a holder gives up a
// grant of ttl whose renewals fail: max(ttl/10, 20ms), kept below ttl/2.
// It covers the difference between the holder's and the store's clock
// rates and the time the holder needs to stop its work.
func DefaultMargin(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 20*time.Millisecond), ttl/2-time.Millisecond)
}
