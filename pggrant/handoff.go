package pggrant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	fence "github.com/fenced-dev/fenced"
)

// DefaultMaxHandoffs is how many times in a row, unless WithMaxHandoffs
// says otherwise, a lock passes directly from a holder to a waiter of the
// same Grantor before it is released for every Grantor's waiters.
const DefaultMaxHandoffs = 8

// MaxHandoffsLimit is the largest value WithMaxHandoffs accepts.
const MaxHandoffsLimit = 1000

// WithMaxHandoffs bounds direct handoffs (0..MaxHandoffsLimit, default
// DefaultMaxHandoffs; 0 turns them off). When a holder releases a lock
// that a waiter of the same Grantor is waiting for, one statement ends the
// holder's grant and grants the waiter (a new token, one commit) instead
// of a release and then the waiter's grant (two commits, one after the
// other). After n such handoffs in a row the next release is an ordinary
// one, which the waiters of other Grantors (other processes) are notified
// of and race for on equal terms, so that one busy process cannot keep a
// lock from the others.
func WithMaxHandoffs(n int) Option { return func(o *options) { o.maxHandoffs = n } }

// offer is a waiting Acquire's standing request for a direct handoff: the
// holder id and TTL it would hold under, and where the releaser that takes
// the offer delivers the outcome (exactly once: the grant, or nil).
type offer struct {
	holder string
	ttl    time.Duration
	got    chan *held
}

// handoffSQL ends holder $2's live grant of name $1 (token $3) and grants
// the name to holder $4 for $5 milliseconds with the next token, in one
// statement on the database's clock. It returns the new token and grant
// time (NULL when $2 no longer held the name), and whether another holder
// has it. No notification: the lock does not become free.
const handoffSQL = `
WITH r AS (
	UPDATE fence_lock_grants
	SET holder = $4, fencing_token = fencing_token + 1, granted_at = now(),
	    expires_at = now() + $5 * interval '1 millisecond'
	WHERE name = $1 AND holder = $2 AND fencing_token = $3 AND expires_at > now()
	RETURNING fencing_token, granted_at
)
SELECT (SELECT fencing_token FROM r), (SELECT granted_at FROM r),
	coalesce((SELECT holder IS NOT NULL AND holder <> $2 AND expires_at > now()
		FROM fence_lock_grants WHERE name = $1), false)`

// offerHandoff queues o behind name's other offers (one per waiting
// Acquire of this Grantor, in arrival order).
func (g *Grantor) offerHandoff(name string, o *offer) {
	if g.maxHandoffs == 0 {
		return
	}
	g.mu.Lock()
	g.offers[name] = append(g.offers[name], o)
	g.mu.Unlock()
}

// dropOfferLocked removes o from name's offers; false if it is not there.
func (g *Grantor) dropOfferLocked(name string, o *offer) bool {
	q := g.offers[name]
	i := slices.Index(q, o)
	if i < 0 {
		return false
	}
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(g.offers, name)
	} else {
		g.offers[name] = q
	}
	return true
}

// withdrawOffer takes o back. If a releaser took it first, it waits for the
// releaser's outcome and returns it (the grant handed over, or nil).
func (g *Grantor) withdrawOffer(name string, o *offer) *held {
	if g.maxHandoffs == 0 {
		return nil
	}
	g.mu.Lock()
	if g.dropOfferLocked(name, o) {
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	return <-o.got
}

// takeOffer returns name's oldest waiting offer for a release by releaser
// to hand the lock to (never the releaser's own), or nil: none, or the
// handoffs in a row reached the bound. wakeLocal
// tells whether an ordinary release may wake this Grantor's waiters ahead
// of the notification (not right after a run of handoffs, so that other
// Grantors' waiters race on equal terms).
func (g *Grantor) takeOffer(name, releaser string) (o *offer, wakeLocal bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.offers[name] {
		// Not the releaser's own offer: a waiter releasing a grant it no
		// longer wants (its context ended as it was granted).
		if w.holder != releaser {
			o = w
			break
		}
	}
	if o == nil {
		delete(g.streaks, name)
		return nil, true
	}
	if g.streaks[name] >= g.maxHandoffs {
		delete(g.streaks, name)
		return nil, false
	}
	g.dropOfferLocked(name, o)
	g.streaks[name]++
	return o, true
}

// handOff ends h's grant and grants o's waiter in one statement. It
// delivers the waiter's outcome to o in every case. done is false when
// the statement could not raise the token (the counter is at its
// maximum): the caller then releases in the ordinary way.
func (h *held) handOff(ctx context.Context, o *offer) (res fence.ReleaseResult, done bool, err error) {
	g := h.g
	var (
		token     *int64
		grantedAt *time.Time
		other     bool
	)
	sent := time.Now()
	err = g.pool.QueryRow(ctx, handoffSQL, h.grant.Name, h.holder, int64(h.grant.Token), o.holder, o.ttl.Milliseconds()).
		Scan(&token, &grantedAt, &other)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "22003" { // numeric_value_out_of_range
			o.got <- nil
			return "", false, nil
		}
		// The outcome is unknown: undo a grant to the waiter that may
		// have been made, and only then let the waiter try again (a
		// withdrawal after its own new grant would end that one), and
		// report the release as failed, as an ordinary one.
		g.withdraw(h.grant.Name, o.holder, err)
		o.got <- nil
		return "", true, fmt.Errorf("pggrant: release lock %q (token %d): %w; the grant ends with its TTL at the latest", h.grant.Name, h.grant.Token, err)
	}
	if token == nil {
		o.got <- nil
		if other {
			return fence.NotOwned, true, nil
		}
		return fence.AlreadyReleased, true, nil
	}
	nh := g.newHeld(h.grant.Name, o.holder, fence.Token(*token), *grantedAt, o.ttl, sent)
	if !g.keep(nh) {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		nh.Release(rctx)
		cancel()
		nh = nil
	}
	o.got <- nh
	return fence.Released, true, nil
}
