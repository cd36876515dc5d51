package pggrant_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/pggrant"
)

// waitOffering waits until a waiter of g for name sleeps with a handoff
// offer up.
func waitOffering(t *testing.T, g *pggrant.Grantor, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !pggrant.Offering(g, name) {
		if time.Now().After(deadline) {
			t.Fatalf("no waiter for %q offered a handoff within 30s", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// rowOf reads name's row: whether someone holds it and its token.
func rowOf(t *testing.T, name string) (held bool, token int64) {
	t.Helper()
	conn, err := pgx.Connect(testCtx(t), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(testCtx(t), `SELECT holder IS NOT NULL AND expires_at > now(), fencing_token
		FROM fence_lock_grants WHERE name = $1`, name).Scan(&held, &token); err != nil {
		t.Fatal(err)
	}
	return held, token
}

// A release with a waiter of the same Grantor hands the lock over in the
// release's statement: when Release returns, the row already names the
// waiter under the next token (no moment without a holder for another
// process to take), and the waiter's grant is that token and valid.
func TestHandoff_DirectToLocalWaiter(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	name := fmt.Sprintf("handoff-%d", time.Now().UnixNano())
	h1, err := g.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		h   fence.Held
		err error
	}
	res := make(chan got, 1)
	go func() {
		h, err := g.Acquire(ctx, name, fence.Wait(), fence.WithTTL(7*time.Second))
		res <- got{h, err}
	}()
	waitOffering(t, g, name)
	if r, err := h1.Release(ctx); err != nil || r != fence.Released {
		t.Fatalf("release = %v, %v; want Released", r, err)
	}
	held, token := rowOf(t, name)
	if !held || token != int64(h1.Grant().Token)+1 {
		t.Fatalf("right after the release the row has held=%v token %d; want held by the waiter under token %d", held, token, h1.Grant().Token+1)
	}
	w := <-res
	if w.err != nil {
		t.Fatal(w.err)
	}
	if w.h.Grant().Token != h1.Grant().Token+1 || w.h.Grant().TTL != 7*time.Second || w.h.Remaining() <= 0 {
		t.Fatalf("handed grant %+v remaining %v; want token %d, TTL 7s, valid", w.h.Grant(), w.h.Remaining(), h1.Grant().Token+1)
	}
	if err := w.h.Verify(ctx); err != nil {
		t.Fatalf("the handed grant does not verify: %v", err)
	}
	// The old holder's grant is over: a second release changes nothing.
	if r, err := h1.Release(ctx); err != nil || r != fence.NotOwned {
		t.Fatalf("second release of the old grant = %v, %v; want NotOwned", r, err)
	}
	if r, err := w.h.Release(ctx); err != nil || r != fence.Released {
		t.Fatalf("release of the handed grant = %v, %v; want Released", r, err)
	}
	if held, _ := rowOf(t, name); held {
		t.Fatal("the row is still held after the last release with no one waiting")
	}
}

// Handoffs within one Grantor are bounded: two waiters of one Grantor that
// pass a lock back and forth, each releasing only when the other is
// waiting, cannot keep it from a waiter of another Grantor (another
// process) for ever. Tokens rise throughout.
func TestHandoff_BoundedSoOthersGetTheLock(t *testing.T) {
	ctx := testCtx(t)
	local := open(t, pgAddr(), pggrant.WithMaxHandoffs(3))
	other := open(t, pgAddr())
	name := fmt.Sprintf("handoff-fair-%d", time.Now().UnixNano())
	stop := make(chan struct{})
	var (
		mu   sync.Mutex
		last fence.Token
		bad  error
		wg   sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, err := local.Acquire(ctx, name, fence.Wait())
				if err != nil {
					mu.Lock()
					bad = err
					mu.Unlock()
					return
				}
				mu.Lock()
				if h.Grant().Token <= last {
					bad = fmt.Errorf("token %d after %d", h.Grant().Token, last)
				}
				last = h.Grant().Token
				mu.Unlock()
				// Release only once the other local waiter has its offer
				// up, so that every release could hand the lock over.
				for !pggrant.Offering(local, name) {
					select {
					case <-stop:
					case <-time.After(time.Millisecond):
						continue
					}
					break
				}
				h.Release(ctx)
			}
		})
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := other.Acquire(wctx, name, fence.Wait())
	if err == nil {
		mu.Lock()
		if h.Grant().Token <= last {
			bad = fmt.Errorf("the other Grantor's token %d is not above %d", h.Grant().Token, last)
		}
		mu.Unlock()
		h.Release(ctx)
	}
	close(stop)
	wg.Wait()
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a waiter of another Grantor did not get the lock in 30s while two local waiters passed it around")
	}
	if err != nil {
		t.Fatal(err)
	}
	if bad != nil {
		t.Fatal(bad)
	}
}

// A waiter whose context ends while its offer is up takes nothing: the
// next release frees the lock instead of handing it to the gone waiter.
// (It is cancelled while it sleeps: a grant statement cancelled on its way
// may still run in PostgreSQL after the release, and grant the name to
// nobody until its TTL, which the withdrawal cannot always reach; see
// acquireErr.)
func TestHandoff_CancelledWaiterTakesNothing(t *testing.T) {
	ctx := testCtx(t)
	g := open(t, pgAddr())
	asleep := make(chan struct{}, 1)
	pggrant.OnSleep(g, func(string) {
		select {
		case asleep <- struct{}{}:
		default:
		}
	})
	name := fmt.Sprintf("handoff-cancel-%d", time.Now().UnixNano())
	h1, err := g.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := g.Acquire(wctx, name, fence.Wait())
		res <- err
	}()
	waitOffering(t, g, name)
	select {
	case <-asleep:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not go to sleep within 30s")
	}
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter = %v; want context.Canceled", err)
	}
	if r, err := h1.Release(ctx); err != nil || r != fence.Released {
		t.Fatalf("release = %v, %v", r, err)
	}
	if held, token := rowOf(t, name); held {
		t.Fatalf("the lock went to a waiter that had given up (token %d; the released grant's was %d)", token, h1.Grant().Token)
	}
}

// WithMaxHandoffs outside 0..MaxHandoffsLimit is refused.
func TestHandoff_BadOption(t *testing.T) {
	for _, n := range []int{-1, pggrant.MaxHandoffsLimit + 1} {
		if _, err := pggrant.Open(testCtx(t), dsn(pgAddr()), pggrant.WithMaxHandoffs(n)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("WithMaxHandoffs(%d): %v; want ErrInvalidArgument", n, err)
		}
	}
}
