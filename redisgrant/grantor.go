package redisgrant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/turns"
)

// Errors of the grantor besides those of package fence. Check them with
// errors.Is.
var (
	// ErrNoLua reports a Redis that does not run Lua scripts for this
	// client: EVAL/EVALSHA renamed away or disabled, or an ACL user
	// without the @scripting commands. Nothing was written.
	ErrNoLua = errors.New("redisgrant: Redis does not run Lua scripts for this client")
	// ErrCrossSlot reports keys of one operation that are in different
	// hash slots of a Redis Cluster, which no script may touch together.
	// Nothing was written.
	ErrCrossSlot = errors.New("redisgrant: keys of one operation are in different hash slots")
	// ErrEvictable reports a Redis whose maxmemory-policy may evict keys
	// without a TTL (allkeys-*): an evicted token counter would restart
	// tokens from 1. Nothing was written.
	ErrEvictable = errors.New("redisgrant: Redis may evict the token counters")
	// ErrCorrupt reports a key of the grantor that holds something the
	// grantor did not write there (a counter that is not a token, a key of
	// another type). Nothing was written.
	ErrCorrupt = errors.New("redisgrant: corrupt key")
)

// Grantor grants fenced locks, semaphore permits and rate-limit decisions
// from one Redis (docs/library-mode-redis.md). Its zero value is not
// usable; make one with New. A Grantor is safe for concurrent use.
type Grantor struct {
	rdb     redis.UniversalClient
	turns   turns.Queue // the waiters of this Grantor, by channel
	prefix  string
	keyOf   func(name, part string) string
	recheck time.Duration
	issuer  string // the issuer id a counter this Grantor creates gets

	mu      sync.Mutex
	checked bool // Check passed once
}

// Option configures a Grantor.
type Option func(*Grantor)

// WithPrefix sets the prefix of every key and channel the grantor uses
// (default "fenced:"). It may not contain '{' or '}': the grantor puts
// each name in a hash tag of its own.
func WithPrefix(p string) Option { return func(g *Grantor) { g.prefix = p } }

// WithKeys replaces the grantor's key layout with keyOf(name, part), to
// fit a layout you already have; part is "lease" or "counter" (a lock),
// "sem" or "sem-counter" (a semaphore), "limit:fixed", "limit:sliding" or
// "limit:bucket" (a limiter). The keys of one name must share a hash slot
// (give them one hash tag): every operation checks this before it sends
// anything, on a standalone Redis too (so that the same keys work on a
// cluster later), and fails with an error wrapping ErrCrossSlot.
// Pub/sub channels keep the prefix layout.
func WithKeys(keyOf func(name, part string) string) Option {
	return func(g *Grantor) { g.keyOf = keyOf }
}

// DefaultRecheck is the default bound on how long a waiter sleeps without
// a notification before it asks Redis again (WithRecheck).
const DefaultRecheck = 5 * time.Second

// WithRecheck bounds how long a waiting Acquire sleeps between two looks
// at Redis when no notification arrives (default DefaultRecheck, 10ms to
// 1h). A waiter is woken by the release's pub/sub message and by a timer
// set to the holder's remaining TTL as Redis reported it; the re-check
// only covers a notification lost on the way (Redis pub/sub delivers at
// most once, and not across a reconnect).
func WithRecheck(d time.Duration) Option { return func(g *Grantor) { g.recheck = d } }

// New returns a Grantor on rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). It does not contact Redis; the first operation runs Check.
func New(rdb redis.UniversalClient, opts ...Option) *Grantor {
	g := &Grantor{rdb: rdb, prefix: "fenced:", recheck: DefaultRecheck, issuer: newIssuer()}
	for _, o := range opts {
		o(g)
	}
	return g
}

// validate checks the options.
func (g *Grantor) validate() error {
	if g.keyOf == nil && strings.ContainsAny(g.prefix, "{}") {
		return fmt.Errorf("%w: key prefix %q contains '{' or '}'; the grantor makes the hash tags itself", fence.ErrInvalidArgument, g.prefix)
	}
	if g.recheck < 10*time.Millisecond || g.recheck > time.Hour {
		return fmt.Errorf("%w: recheck interval %v is outside 10ms..1h", fence.ErrInvalidArgument, g.recheck)
	}
	return nil
}

// probeScript answers whether scripts run at all.
var probeScript = redis.NewScript(`return 'fenced'`)

// Check verifies, without writing anything, that the Redis behind the
// Grantor can keep its promises: the options are valid, Lua scripts run
// for this client (else ErrNoLua), and the maxmemory-policy does not evict
// keys without a TTL (else ErrEvictable; a Redis that refuses CONFIG GET
// to this client is not checked). Every operation runs Check first until
// it has passed once.
func (g *Grantor) Check(ctx context.Context) error {
	g.mu.Lock()
	done := g.checked
	g.mu.Unlock()
	if done {
		return nil
	}
	if err := g.validate(); err != nil {
		return fmt.Errorf("redisgrant: %w", err)
	}
	if err := probeScript.Run(ctx, g.rdb, []string{g.prefix + "probe"}).Err(); err != nil {
		if noLua(err) {
			return fmt.Errorf("%w: %v; the grantor runs every operation as one Lua script (EVALSHA); allow @scripting for this user or use the fenced server", ErrNoLua, err)
		}
		return fmt.Errorf("redisgrant: check: %w", err)
	}
	if pol, err := g.rdb.ConfigGet(ctx, "maxmemory-policy").Result(); err == nil {
		if p := pol["maxmemory-policy"]; strings.HasPrefix(p, "allkeys-") {
			return fmt.Errorf("%w: maxmemory-policy is %s, which may evict a token counter (a key without a TTL) and restart its tokens; set noeviction or a volatile-* policy", ErrEvictable, p)
		}
	}
	g.mu.Lock()
	g.checked = true
	g.mu.Unlock()
	return nil
}

// noLua reports whether err says that scripts do not run.
func noLua(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "unknown command") || strings.Contains(s, "noperm") ||
		strings.Contains(s, "no permissions") || strings.Contains(s, "lua") && strings.Contains(s, "disabled")
}

// keys returns the keys of name's parts (e.g. "lease", "counter"), by
// default all in the hash slot of name's hash tag, and checks that they
// share a slot (a layout of WithKeys may not): nothing is sent that a
// cluster would refuse.
func (g *Grantor) keys(name string, suffixes ...string) ([]string, error) {
	if err := fence.ValidateName(name); err != nil {
		return nil, err
	}
	ks := make([]string, len(suffixes))
	for i, s := range suffixes {
		if g.keyOf != nil {
			ks[i] = g.keyOf(name, s)
		} else {
			ks[i] = g.prefix + "{" + name + "}:" + s
		}
	}
	if err := sameSlot(ks...); err != nil {
		return nil, err
	}
	return ks, nil
}

// channel is the pub/sub channel a release of name's object of kind
// suffix publishes on.
func (g *Grantor) channel(name, suffix string) string {
	return g.prefix + "{" + name + "}:" + suffix + ":released"
}

// newSecret returns a random owner token: 16 bytes in hex. It is the
// proof of ownership for release and renewal, never a fencing token.
func newSecret() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// newIssuer returns a random issuer id (8 bytes in hex, as the server's),
// one per Grantor; a counter keeps the first one it was given.
func newIssuer() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// scriptError maps the errors the scripts raise to the package's errors.
func scriptError(op, name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "FENCED_OVERFLOW"):
		return fmt.Errorf("redisgrant: %s %q: %w: the counter is at %d", op, name, fence.ErrTokenOverflow, fence.MaxToken)
	case strings.HasPrefix(msg, "FENCED_CORRUPT"):
		return fmt.Errorf("redisgrant: %s %q: %w: %s", op, name, ErrCorrupt, strings.TrimPrefix(msg, "FENCED_CORRUPT "))
	case strings.HasPrefix(msg, "FENCED_CAPACITY"):
		return fmt.Errorf("redisgrant: %s %q: %w: %s", op, name, fence.ErrCapacityMismatch, strings.TrimPrefix(msg, "FENCED_CAPACITY "))
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return fmt.Errorf("redisgrant: %s %q: %w: %s", op, name, ErrCorrupt, msg)
	case strings.Contains(msg, "CROSSSLOT"):
		return fmt.Errorf("redisgrant: %s %q: %w: %s", op, name, ErrCrossSlot, msg)
	case noLua(err):
		return fmt.Errorf("redisgrant: %s %q: %w: %v", op, name, ErrNoLua, err)
	}
	return fmt.Errorf("redisgrant: %s %q: %w", op, name, err)
}

// serverTime converts a Redis TIME reply (seconds, microseconds) to a
// time.Time, for display only.
func serverTime(sec, usec int64) time.Time { return time.Unix(sec, usec*1000) }
