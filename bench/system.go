package bench

import (
	"context"
	"time"
)

// System is a lock service under test. Implementations exist for fenced
// (Fenced) and, in the separate bench/compare module, for etcd, ZooKeeper
// and Redis, so that every system runs through the same workload code.
type System interface {
	// Name names the system in results, e.g. "fenced" or "etcd".
	Name() string
	// NewLocker opens one holder: a session (lease, ephemeral node, ...)
	// whose liveness the system keeps up for the locker's whole life, the
	// way the system's documentation recommends (for example one shared
	// connection per process and many sessions over it, when the system
	// supports that). id numbers the lockers of one run from 0. ttl is
	// how long the session may go unrenewed before the server ends it.
	NewLocker(ctx context.Context, id int, ttl time.Duration) (Locker, error)
	// Close releases what the System itself holds (shared connections).
	Close() error
}

// Locker is one holder with its own session. Its methods are called from
// one goroutine at a time.
type Locker interface {
	// Lock blocks until this holder holds the lock name and returns the
	// fencing token of the grant (for systems without one, the number
	// the recipe uses as a token: etcd's revision, ZooKeeper's zxid or
	// sequence, a Redis INCR counter).
	Lock(ctx context.Context, name string) (uint64, error)
	// Unlock releases the lock name, which this holder holds.
	Unlock(ctx context.Context, name string) error
	// Close ends the session, releasing whatever it still holds.
	Close() error
}

// RWLocker is implemented by lockers of systems with a read/write lock;
// the rwlock workload needs it. Its methods are called from one goroutine
// at a time.
type RWLocker interface {
	// RWLock blocks until this holder holds the read/write lock name for
	// reading (write false, shared) or writing (exclusive) and returns the
	// grant's fencing token.
	RWLock(ctx context.Context, name string, write bool) (uint64, error)
	// RWUnlock releases the grant of name this holder holds.
	RWUnlock(ctx context.Context, name string) error
}

// FencedWriter is implemented by lockers that can write to a resource
// guarded by fencing tokens: the write succeeds only if no higher token
// has been presented for key. The fenced-write workload needs it.
type FencedWriter interface {
	FencedWrite(ctx context.Context, key string, value []byte, token uint64) error
}

// Semaphorer is implemented by lockers that can take a permit of a
// counting semaphore; the semaphore workload needs it.
type Semaphorer interface {
	// AcquirePermit blocks until this holder holds one permit of the
	// semaphore name of capacity, and returns its token and slot (for
	// systems without slots, -1: their tokens are not checked per slot).
	AcquirePermit(ctx context.Context, name string, capacity int) (token uint64, slot int, err error)
	// ReleasePermit releases the permit this holder holds of name.
	ReleasePermit(ctx context.Context, name string) error
}

// Queuer is implemented by lockers of systems with a work queue; the
// queue workload needs it. Its methods are called from one goroutine at a
// time.
type Queuer interface {
	// Push enqueues payload on queue.
	Push(ctx context.Context, queue string, payload []byte) error
	// Claim blocks until an item of queue is handed to this holder,
	// claimed for visibility, and returns the item's id (unique in the
	// queue) and the claim token: a number from one counter that rises
	// with every claim, so a redelivered item's token is above its
	// earlier claims'.
	Claim(ctx context.Context, queue string, visibility time.Duration) (item string, token uint64, err error)
	// Ack ends this holder's claim of item under token: the item is done
	// and removed. It fails when token is not the item's current claim.
	Ack(ctx context.Context, queue, item string, token uint64) error
}

// AckClaimer is a Queuer that acks an item in the same command as the
// claim of the next one (ack-and-claim-next).
type AckClaimer interface {
	Queuer
	// AckAndClaimNext acks this holder's claim of item under token and
	// claims the next item of queue with the same visibility, as Ack then
	// Claim do,
	// in one command. ackErr is the ack's outcome; the claim goes on
	// whatever it is.
	AckAndClaimNext(ctx context.Context, queue, item string, token uint64) (next string, nextToken uint64, ackErr, err error)
}

// BatchQueuer is a Queuer with batches: the queue workload with
// Options.Batch above 1 needs it.
type BatchQueuer interface {
	Queuer
	// PushBatch enqueues payloads on queue in one call.
	PushBatch(ctx context.Context, queue string, payloads [][]byte) error
	// ClaimBatch acks this holder's claims acks (as Ack, each with its own
	// outcome in ackErrs, whatever the claim does) and claims up to max
	// items of queue for visibility, in one call, waiting for at least one
	// when none is available. Each item has its own claim token.
	ClaimBatch(ctx context.Context, queue string, max int, visibility time.Duration, acks []ItemToken) (claimed []ItemToken, ackErrs []error, err error)
}

// ItemToken is a claimed item and its claim token.
type ItemToken struct {
	Item  string
	Token uint64
}

// Limiter is one client's handle on a rate limiter.
type Limiter interface {
	// Allow takes one permit if one is free now and reports whether it
	// did.
	Allow(ctx context.Context) (bool, error)
}

// LimiterSystem is implemented by systems with a rate limiter; the
// limiter workload needs it.
type LimiterSystem interface {
	// NewLimiters makes name a token bucket of capacity permits that
	// refills ratePerS permits a second and returns n handles on it, one
	// per client, each taking batch permits from the server per round
	// trip (0 or 1: one per decision; a system that cannot batch refuses
	// batch above 1).
	NewLimiters(ctx context.Context, name string, capacity, ratePerS uint64, n, batch int) ([]Limiter, error)
}
