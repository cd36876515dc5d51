// Package grantortest is the conformance suite every fence.Grantor runs
// against itself, on its real store: the fenced server (client.Grantor),
// PostgreSQL (pggrant) and Redis. It checks what docs/design.md promises of
// a grantor: tokens strictly increasing per name across release, expiry and
// a restart of the store; at most one holder at a time; the three release
// outcomes; a holder paused past its TTL fenced by the postgres guard; and
// waiters woken by the store rather than by polling.
//
// A grantor's test describes its store and calls Run:
//
//	func TestGrantor_Conformance(t *testing.T) {
//		grantortest.Run(t, grantortest.Store{
//			Addr:    store.Addr,
//			Open:    func(t *testing.T, addr string) fence.Grantor { return open(t, addr) },
//			Restart: store.Restart,
//			Recheck: 30 * time.Second,
//		})
//	}
//
// The suite puts a fault proxy (internal/faultproxy) between each grantor it
// opens and the store, and pauses a holder by blackholing its proxy: the
// holder's renewals stall, as those of a stopped process or a partitioned
// host do, while the store and the other holders go on.
package grantortest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testdb"
	"github.com/fenced-dev/fenced/postgres"
)

// Store is the store under test and how to reach it.
type Store struct {
	// Addr is the store's "host:port". The suite reaches it through a
	// proxy of its own for each grantor it opens.
	Addr string
	// Open returns a new grantor on the store that connects to addr (a
	// proxy's address, standing for Addr) with connections of its own, as
	// a separate process would. It closes the grantor when t ends.
	Open func(t *testing.T, addr string) fence.Grantor
	// Restart stops the store abruptly (kill -9, or an immediate
	// shutdown) and starts it again on Addr with its data. Nil skips the
	// restart test.
	Restart func(t *testing.T)
	// Recheck is the grantor's fallback re-check interval: the longest a
	// waiter goes without looking at the store when no notification
	// comes. Open must configure it to at least 10s; a store that pushes
	// grants to waiters and never re-checks (the server) gives 0. Every
	// handoff must complete within min(Recheck/2, 5s).
	Recheck time.Duration
	// PostgresURL is a PostgreSQL database in which the suite keeps the
	// watermarks of the guard that fences a paused holder. Empty: the
	// suite starts a throwaway PostgreSQL server of its own.
	PostgresURL string
}

// Run runs the whole suite. Names are unique per subtest, so the store may
// be shared with other tests.
func Run(t *testing.T, st Store) {
	if st.Open == nil || st.Addr == "" {
		t.Fatal("grantortest: Store needs Addr and Open")
	}
	if st.Recheck != 0 && st.Recheck < 10*time.Second {
		t.Fatalf("grantortest: Store.Recheck is %v; configure the grantor's fallback re-check to at least 10s so that a polling waiter cannot pass", st.Recheck)
	}
	s := &suite{Store: st, run: t}
	t.Run("TokensRiseAcrossRelease", s.testRelease)
	t.Run("TokensRiseAcrossExpiry", s.testExpiry)
	t.Run("TokensRiseAcrossRestart", s.testRestart)
	t.Run("AtMostOneHolder", s.testOneHolder)
	t.Run("ReleaseOutcomes", s.testReleaseOutcomes)
	t.Run("PausedHolderFenced", s.testPausedHolder)
	t.Run("WaitersWokenWithoutPolling", s.testHandoff)
	t.Run("RenewKeepsToken", s.testRenew)
	t.Run("JeopardyBeforeLoss", s.testJeopardy)
	t.Run("WaitEndsWithContext", s.testWaitCancelled)
	t.Run("BadInput", s.testBadInput)
}

type suite struct {
	Store
	run    *testing.T // Run's
	pgOnce sync.Once
	pgURL  string
	pgErr  error
}

// grantor is a grantor opened by the suite and the proxy in front of it.
type grantor struct {
	fence.Grantor
	proxy *faultproxy.Proxy
}

// pause stalls every connection of the grantor (a blackhole): it can no
// longer renew, release or learn anything from the store.
func (g grantor) pause() { g.proxy.SetMode(faultproxy.Blackhole) }

// resume lets the grantor reach the store again (its old connections are
// reset, as after a real partition).
func (g grantor) resume() { g.proxy.SetMode(faultproxy.Pass) }

func (s *suite) open(t *testing.T) grantor {
	t.Helper()
	p, err := faultproxy.New(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Open(t, p.Addr())
	// Cleanups run last-in first-out: the proxy closes (resetting its
	// connections) before the grantor does, so a paused grantor's Close
	// fails fast instead of waiting on a blackhole.
	t.Cleanup(func() { p.Close() })
	return grantor{Grantor: g, proxy: p}
}

var nameSeq struct {
	sync.Mutex
	n int
}

// name returns a lock name unique in this test binary's run.
func name(t *testing.T) string {
	nameSeq.Lock()
	defer nameSeq.Unlock()
	nameSeq.n++
	return fmt.Sprintf("grantortest-%d-%d-%d", time.Now().UnixNano()%1e9, nameSeq.n, rand.IntN(1e6))
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func acquire(t *testing.T, ctx context.Context, g fence.Grantor, name string, opts ...fence.AcquireOption) fence.Held {
	t.Helper()
	h, err := g.Acquire(ctx, name, opts...)
	if err != nil {
		t.Fatalf("acquire %q: %v", name, err)
	}
	if g := h.Grant(); g.Name != name || !g.Token.Valid() {
		t.Fatalf("acquire %q: grant %+v: want Name %q and a valid token", name, g, name)
	}
	return h
}

func release(t *testing.T, ctx context.Context, h fence.Held, want fence.ReleaseResult) {
	t.Helper()
	res, err := h.Release(ctx)
	if err != nil || res != want {
		t.Fatalf("release %q (token %d) = %q, %v; want %q", h.Grant().Name, h.Grant().Token, res, err, want)
	}
}

// waitDone waits until h's grant ends, at most d.
func waitDone(t *testing.T, h fence.Held, d time.Duration) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(d):
		t.Fatalf("grant %q (token %d) did not end within %v of its holder being cut off; ValidUntil was %v away",
			h.Grant().Name, h.Grant().Token, d, time.Until(h.ValidUntil()))
	}
}

func wantAbove(t *testing.T, what string, got, prev fence.Token) {
	t.Helper()
	if got <= prev {
		t.Fatalf("%s: token %d is not above the earlier token %d", what, got, prev)
	}
}

// testRelease: acquire and release a name repeatedly; every grant's token
// is above the one before, from two grantors in turn.
func (s *suite) testRelease(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	gs := []grantor{s.open(t), s.open(t)}
	n := name(t)
	var prev fence.Token
	for i := range 6 {
		h := acquire(t, ctx, gs[i%2], n)
		g := h.Grant()
		wantAbove(t, fmt.Sprintf("grant %d after a release", i), g.Token, prev)
		if g.Kind != fence.KindLock || g.Scope != n || g.Issuer == "" || g.TTL != fence.DefaultGrantTTL {
			t.Fatalf("grant %+v: want Kind lock, Scope %q, an Issuer and TTL %v", g, n, fence.DefaultGrantTTL)
		}
		prev = g.Token
		release(t, ctx, h, fence.Released)
	}
}

// testExpiry: a holder cut off from the store keeps no grant past its TTL;
// a waiter then gets the name with a higher token, and the cut-off
// holder's Done closes by its ValidUntil although it cannot reach the
// store.
func (s *suite) testExpiry(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)
	ttl := time.Second
	h1 := acquire(t, ctx, g1, n, fence.WithTTL(ttl))
	t1 := h1.Grant().Token
	g1.pause()
	h2 := acquire(t, ctx, g2, n, fence.Wait(), fence.WithTTL(10*time.Second))
	wantAbove(t, "grant after the holder's TTL ran out", h2.Grant().Token, t1)
	waitDone(t, h1, ttl+10*time.Second)
	if err := h1.Err(); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("cut-off holder's Err = %v; want an error wrapping fence.ErrLockLost", err)
	}
	if cause := context.Cause(h1.Context()); !errors.Is(cause, fence.ErrLockLost) {
		t.Fatalf("cut-off holder's Context cause = %v; want fence.ErrLockLost", cause)
	}
	release(t, ctx, h2, fence.Released)
	h3 := acquire(t, ctx, g2, n)
	wantAbove(t, "grant after a release that followed an expiry", h3.Grant().Token, h2.Grant().Token)
	release(t, ctx, h3, fence.Released)
}

// testRestart: tokens keep rising across an abrupt restart of the store,
// for a name that was released before it and for one whose holder was
// cut off before it (its grant ends by expiry, after the restart).
func (s *suite) testRestart(t *testing.T) {
	if s.Restart == nil {
		t.Skip("the store has no restart hook")
	}
	ctx := testCtx(t, 120*time.Second)
	g1 := s.open(t)
	released, held := name(t), name(t)
	h := acquire(t, ctx, g1, released)
	tReleased := h.Grant().Token
	release(t, ctx, h, fence.Released)
	hHeld := acquire(t, ctx, g1, held, fence.WithTTL(time.Second))
	tHeld := hHeld.Grant().Token
	g1.pause()

	s.Restart(t)

	g2 := s.open(t)
	h = acquire(t, ctx, g2, released, fence.Wait())
	wantAbove(t, "grant of a released name after a restart", h.Grant().Token, tReleased)
	release(t, ctx, h, fence.Released)
	h = acquire(t, ctx, g2, held, fence.Wait())
	wantAbove(t, "grant of a name that expired across a restart", h.Grant().Token, tHeld)
	release(t, ctx, h, fence.Released)
}

// testOneHolder: holders on separate grantors contend for one name; no two
// ever hold it at once, and in the order they were granted their tokens
// rise strictly.
func (s *suite) testOneHolder(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	n := name(t)
	const holders, rounds = 4, 8
	var (
		mu     sync.Mutex
		inUse  bool
		tokens []fence.Token
		errs   = make(chan error, holders)
		wg     sync.WaitGroup
	)
	for range holders {
		g := s.open(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				h, err := g.Acquire(ctx, n, fence.Wait())
				if err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					return
				}
				mu.Lock()
				if inUse {
					mu.Unlock()
					errs <- fmt.Errorf("token %d granted while another holder held %q", h.Grant().Token, n)
					return
				}
				inUse = true
				tokens = append(tokens, h.Grant().Token)
				mu.Unlock()
				time.Sleep(time.Millisecond) // the holder's work
				mu.Lock()
				inUse = false
				mu.Unlock()
				if res, err := h.Release(ctx); err != nil || res != fence.Released {
					errs <- fmt.Errorf("release token %d = %q, %w", h.Grant().Token, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(tokens) != holders*rounds {
		t.Fatalf("%d grants; want %d", len(tokens), holders*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		wantAbove(t, fmt.Sprintf("grant %d in grant order", i), tokens[i], tokens[i-1])
	}
}

// testReleaseOutcomes: Released, then AlreadyReleased for the same grant;
// NotOwned for a grant that expired while another holder took the name;
// AlreadyReleased for one that expired with the name free again. Release
// ends the grant locally first, with fence.ErrReleased.
func (s *suite) testReleaseOutcomes(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)

	h := acquire(t, ctx, g1, n)
	release(t, ctx, h, fence.Released)
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open after Release")
	}
	if err := h.Err(); !errors.Is(err, fence.ErrReleased) {
		t.Fatalf("Err after Release = %v; want fence.ErrReleased", err)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, fence.ErrReleased) {
		t.Fatalf("Context cause after Release = %v; want fence.ErrReleased", cause)
	}
	release(t, ctx, h, fence.AlreadyReleased)

	// Expired, and another holder has the name: NotOwned, and that
	// holder keeps it.
	h1 := acquire(t, ctx, g1, n, fence.WithTTL(time.Second))
	g1.pause()
	h2 := acquire(t, ctx, g2, n, fence.Wait())
	waitDone(t, h1, 15*time.Second)
	g1.resume()
	release(t, ctx, h1, fence.NotOwned)
	if err := h2.Verify(ctx); err != nil {
		t.Fatalf("the new holder after the old one's NotOwned release: Verify = %v; want nil", err)
	}
	if _, err := g1.Acquire(ctx, n); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("try acquire while held = %v; want fence.ErrNotGranted", err)
	}

	// Expired, and the name is free again: AlreadyReleased.
	release(t, ctx, h2, fence.Released)
	h3 := acquire(t, ctx, g1, n, fence.WithTTL(time.Second))
	g1.pause()
	h4 := acquire(t, ctx, g2, n, fence.Wait())
	release(t, ctx, h4, fence.Released)
	waitDone(t, h3, 15*time.Second)
	g1.resume()
	release(t, ctx, h3, fence.AlreadyReleased)
	if err := h3.Verify(ctx); !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Verify of an expired grant = %v; want fence.ErrLockLost", err)
	}
}

// pgGuard returns a postgres guard on the suite's PostgreSQL.
func (s *suite) pgGuard(t *testing.T) *postgres.Guard {
	t.Helper()
	s.pgOnce.Do(func() {
		s.pgURL = s.PostgresURL
		if s.pgURL == "" {
			var pg *testdb.Postgres
			pg, s.pgErr = testdb.StartPostgres()
			if s.pgErr == nil {
				s.pgURL = pg.URL
				s.run.Cleanup(pg.Stop) // when Run's test ends
			}
		}
	})
	if s.pgErr != nil {
		t.Fatalf("the paused-holder test needs a real PostgreSQL: %v", s.pgErr)
	}
	pool, err := pgxpool.New(context.Background(), s.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	g := postgres.New(pool, postgres.WithTable("grantortest_watermarks"))
	if err := g.Migrate(testCtx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	return g
}

// testPausedHolder: the holder pauses past its TTL; the next holder writes
// through the postgres guard; the paused one resumes and writes with its
// old token: the guard rejects it and the next holder's write stands.
func (s *suite) testPausedHolder(t *testing.T) {
	guard := s.pgGuard(t)
	ctx := testCtx(t, 90*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)
	object := "object-" + n
	var value string
	write := func(tok fence.Token, v string) error {
		return guard.Do(ctx, object, tok, func(context.Context) error { value = v; return nil })
	}

	h1 := acquire(t, ctx, g1, n, fence.WithTTL(time.Second))
	t1 := h1.Grant().Token
	if err := write(t1, "first holder"); err != nil {
		t.Fatalf("first holder's write: %v", err)
	}
	g1.pause()
	h2 := acquire(t, ctx, g2, n, fence.Wait())
	if err := write(h2.Grant().Token, "second holder"); err != nil {
		t.Fatalf("second holder's write: %v", err)
	}
	g1.resume()
	// The paused holder wakes up and writes without looking at its grant.
	err := write(t1, "paused holder, late")
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Presented != t1 || stale.Required != h2.Grant().Token {
		t.Fatalf("paused holder's late write with token %d = %v; want a *fence.StaleTokenError requiring %d", t1, err, h2.Grant().Token)
	}
	if value != "second holder" {
		t.Fatalf("value = %q; want the second holder's", value)
	}
	if mark, err := guard.Watermark(ctx, object); err != nil || mark != h2.Grant().Token {
		t.Fatalf("watermark = %d, %v; want %d", mark, err, h2.Grant().Token)
	}
	release(t, ctx, h2, fence.Released)
}

// testHandoff: a waiter gets the name promptly after the holder releases
// it, far below the fallback re-check interval, several times.
func (s *suite) testHandoff(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)
	bound := 5 * time.Second
	if s.Recheck > 0 {
		bound = min(bound, s.Recheck/2)
	}
	var took []time.Duration
	for round := range 3 {
		h1 := acquire(t, ctx, g1, n)
		type result struct {
			h   fence.Held
			at  time.Time
			err error
		}
		got := make(chan result, 1)
		go func() {
			h, err := g2.Acquire(ctx, n, fence.Wait())
			got <- result{h, time.Now(), err}
		}()
		// Give the waiter time to start waiting: a waiter that has not
		// started yet is granted at once, which only shortens the
		// measurement; a polling waiter that has started sleeps for its
		// re-check interval.
		time.Sleep(300 * time.Millisecond)
		releasedAt := time.Now()
		release(t, ctx, h1, fence.Released)
		r := <-got
		if r.err != nil {
			t.Fatalf("round %d: waiter: %v", round, r.err)
		}
		d := r.at.Sub(releasedAt)
		took = append(took, d)
		if d > bound {
			t.Fatalf("round %d: the waiter was granted %v after the release; want within %v (fallback re-check %v): waiters must be woken by the store, not by polling", round, d, bound, s.Recheck)
		}
		release(t, ctx, r.h, fence.Released)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("handoff after release: min %v, max %v (bound %v)", took[0], took[len(took)-1], bound)
}

// testRenew: a grant with a short TTL stays held across several TTLs by
// the background renewals, keeping its token; Renew moves ValidUntil.
func (s *suite) testRenew(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)
	ttl := 2 * time.Second
	h := acquire(t, ctx, g1, n, fence.WithTTL(ttl))
	tok := h.Grant().Token
	first := h.ValidUntil()
	if r := h.Remaining(); r <= 0 || r > ttl {
		t.Fatalf("Remaining = %v just after the grant; want within (0, %v]", r, ttl)
	}
	select {
	case <-h.Done():
		t.Fatalf("grant ended while its renewals were running: %v", h.Err())
	case <-time.After(3 * ttl):
	}
	if err := h.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if !h.ValidUntil().After(first) {
		t.Fatalf("ValidUntil %v did not move past the first %v after renewals", h.ValidUntil(), first)
	}
	if err := h.Verify(ctx); err != nil {
		t.Fatalf("Verify after renewals: %v", err)
	}
	if h.Grant().Token != tok {
		t.Fatalf("token changed from %d to %d across renewals", tok, h.Grant().Token)
	}
	if _, err := g2.Acquire(ctx, n); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("another holder's try while renewed = %v; want fence.ErrNotGranted", err)
	}
	release(t, ctx, h, fence.Released)
	if err := h.Renew(ctx); err == nil {
		t.Fatal("Renew after Release succeeded; want an error")
	}
}

// testJeopardy: a holder whose renewals stop being confirmed is told so
// (Jeopardy closes) while the grant is still valid, before it is lost.
func (s *suite) testJeopardy(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	g := s.open(t)
	ttl := 3 * time.Second
	h := acquire(t, ctx, g, name(t), fence.WithTTL(ttl))
	select {
	case <-h.Jeopardy():
		t.Fatal("Jeopardy closed while renewals were confirmed")
	default:
	}
	g.pause()
	select {
	case <-h.Jeopardy():
	case <-time.After(ttl + 10*time.Second):
		t.Fatalf("Jeopardy did not close within %v of the renewals stopping", ttl+10*time.Second)
	}
	select {
	case <-h.Done():
		t.Fatalf("the grant ended (%v) before or with its jeopardy; want a warning first", h.Err())
	default:
	}
	if h.Remaining() <= 0 {
		t.Fatal("Remaining is 0 in jeopardy; want the validity that is left")
	}
	waitDone(t, h, ttl+10*time.Second)
	if h.Remaining() != 0 {
		t.Fatalf("Remaining = %v after the grant was lost; want 0", h.Remaining())
	}
}

// testWaitCancelled: a wait that ends with its context leaves nothing
// behind: the name goes to the next taker as soon as the holder releases.
func (s *suite) testWaitCancelled(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	g1, g2 := s.open(t), s.open(t)
	n := name(t)
	h := acquire(t, ctx, g1, n)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := g2.Acquire(wctx, n, fence.Wait())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait ended by its context = %v; want context.DeadlineExceeded", err)
	}
	release(t, ctx, h, fence.Released)
	h = acquire(t, ctx, g1, n) // no wait: the abandoned waiter holds nothing
	release(t, ctx, h, fence.Released)
}

// testBadInput: an invalid name or TTL is an error wrapping
// fence.ErrInvalidArgument, and the name stays free.
func (s *suite) testBadInput(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	g := s.open(t)
	n := name(t)
	for _, tc := range []struct {
		name string
		opts []fence.AcquireOption
	}{
		{"", nil},
		{n, []fence.AcquireOption{fence.WithTTL(time.Millisecond)}},
		{n, []fence.AcquireOption{fence.WithTTL(48 * time.Hour)}},
		{n, []fence.AcquireOption{fence.WithTTL(-time.Second), fence.Wait()}},
	} {
		if _, err := g.Acquire(ctx, tc.name, tc.opts...); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Acquire(%q, %d options) = %v; want fence.ErrInvalidArgument", tc.name, len(tc.opts), err)
		}
	}
	h := acquire(t, ctx, g, n) // nothing was taken by the refused calls
	release(t, ctx, h, fence.Released)
}
