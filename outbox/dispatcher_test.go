package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/outbox"
	"github.com/fenced-dev/fenced/postgres"
)

func TestDispatcher_DeliversInOrder(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	res := []string{uniqueName("a"), uniqueName("b"), uniqueName("c")}
	var ids []int64
	var keys []string
	for i := range 30 {
		r, tok := res[i%3], fence.Token(1+i/3)
		ids = append(ids, enqueue(t, ctx, pool, r, tok))
		keys = append(keys, outbox.IdempotencyKey(r, tok))
	}
	var recv receiver
	n, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t))
	if err != nil || n != 30 {
		t.Fatalf("Drain()=%d, %v; want 30", n, err)
	}
	calls := recv.Calls()
	if len(calls) != 30 {
		t.Fatalf("%d calls, want 30", len(calls))
	}
	for i, c := range calls {
		if c.ID != ids[i] || c.Key != keys[i] || c.Attempt != 1 {
			t.Fatalf("call %d=%+v, want id %d, key %q, attempt 1", i, c, ids[i], keys[i])
		}
		if e := lookup(t, ctx, pool, ids[i]); e.State != outbox.StateDelivered || e.Attempts != 1 || e.DoneAt.IsZero() {
			t.Fatalf("entry %d: %+v, want delivered after 1 attempt", ids[i], e)
		}
	}
	g := outbox.NewGuard(pool)
	for _, r := range res {
		if mark, err := g.Watermark(ctx, r); err != nil || mark != 10 {
			t.Fatalf("Watermark(%s)=%d, %v; want 10", r, mark, err)
		}
	}
}

func TestDispatcher_DropsStale(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r, s := uniqueName("r"), uniqueName("s")
	steps := []struct {
		resource string
		token    fence.Token
		required fence.Token // 0: delivered
	}{
		{r, 5, 0},
		{r, 7, 0},
		{r, 6, 7}, // a paused former holder's command, committed late
		{r, 7, 0}, // the same holder again: same key, the receiver deduplicates
		{s, 1, 0}, // another resource has its own watermark
		{r, 3, 7},
	}
	var ids []int64
	for _, st := range steps {
		ids = append(ids, enqueue(t, ctx, pool, st.resource, st.token))
	}
	var recv receiver
	if _, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, st := range steps {
		e := lookup(t, ctx, pool, ids[i])
		if st.required == 0 {
			want = append(want, outbox.IdempotencyKey(st.resource, st.token))
			if e.State != outbox.StateDelivered {
				t.Errorf("command %d (token %d): %s, want delivered", i, st.token, e.State)
			}
			continue
		}
		if e.State != outbox.StateDropped || e.Attempts != 0 ||
			!strings.Contains(e.Reason, "stale token "+st.token.String()) || !strings.Contains(e.Reason, "at least "+st.required.String()) {
			t.Errorf("command %d (token %d): %s after %d attempts, reason %q; want dropped before any attempt, reason naming tokens %d and %d",
				i, st.token, e.State, e.Attempts, e.Reason, st.token, st.required)
		}
	}
	var got []string
	for _, c := range recv.Calls() {
		got = append(got, c.Key)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

func TestDispatcher_RetryUsesSameKey(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	ra, rb := uniqueName("a"), uniqueName("b")
	a := enqueue(t, ctx, pool, ra, 3)
	b := enqueue(t, ctx, pool, rb, 1)
	var mu sync.Mutex
	var tries []outbox.Delivery
	var lastErrSeen string
	errDown := errors.New("receiver unavailable")
	d := fastDispatcher(func(ctx context.Context, dl outbox.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		tries = append(tries, dl)
		if dl.ID == a && dl.Attempt == 3 {
			lastErrSeen = lookup(t, ctx, pool, a).LastError
		}
		if dl.ID == a && dl.Attempt < 3 {
			return errDown
		}
		return nil
	})
	if _, err := d.Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	if len(tries) != 4 {
		t.Fatalf("%d attempts, want 3 for a and 1 for b: %+v", len(tries), tries)
	}
	for i, dl := range tries[:3] {
		if dl.ID != a || dl.Key != ra+":3" || dl.Attempt != i+1 {
			t.Fatalf("attempt %d=%+v, want command %d, key %q, attempt %d", i, dl, a, ra+":3", i+1)
		}
	}
	if tries[3].ID != b {
		t.Fatalf("fourth attempt for %d, want b (%d) after a succeeded: order is kept", tries[3].ID, b)
	}
	if lastErrSeen != errDown.Error() {
		t.Fatalf("last_error during the retry=%q, want %q", lastErrSeen, errDown)
	}
	if e := lookup(t, ctx, pool, a); e.State != outbox.StateDelivered || e.Attempts != 3 || e.LastError != "" {
		t.Fatalf("entry a: %+v, want delivered after 3 attempts, error cleared", e)
	}
}

func TestDispatcher_Permanent(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	a := enqueue(t, ctx, pool, uniqueName("a"), 1)
	b := enqueue(t, ctx, pool, uniqueName("b"), 1)
	var recv receiver
	recv.fail = func(c call) error {
		if c.ID == a {
			return outbox.Permanent(errors.New("400 invalid address"))
		}
		return nil
	}
	if _, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	if e := lookup(t, ctx, pool, a); e.State != outbox.StateFailed || !strings.Contains(e.Reason, "400 invalid address") || e.Attempts != 1 {
		t.Fatalf("entry a: %+v, want failed after 1 attempt with the error as reason", e)
	}
	if e := lookup(t, ctx, pool, b); e.State != outbox.StateDelivered {
		t.Fatalf("entry b: %s, want delivered", e.State)
	}
	if outbox.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
}

func TestDispatcher_OnlyOneRuns(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	id := enqueue(t, ctx, pool, uniqueName("one"), 1)
	inDelivery, release := make(chan struct{}), make(chan struct{})
	var recv receiver
	recv.after = func(call) {
		close(inDelivery)
		<-release
	}
	conn1 := newConn(t)
	ctx1, cancel1 := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fastDispatcher(recv.Deliver).Run(ctx1, conn1) }()
	select {
	case <-inDelivery:
	case err := <-done:
		t.Fatalf("first dispatcher stopped: %v", err)
	}

	var holder uint32
	err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
		int64(outbox.AdvisoryLockKey>>32), int64(outbox.AdvisoryLockKey&0xffffffff)).Scan(&holder)
	if err != nil || holder != conn1.PgConn().PID() {
		t.Fatalf("advisory lock holder=%d, %v; want the first dispatcher's backend %d", holder, err, conn1.PgConn().PID())
	}
	conn2 := newConn(t)
	second := fastDispatcher(recv.Deliver)
	if err := second.Run(ctx, conn2); !errors.Is(err, outbox.ErrAlreadyRunning) {
		t.Fatalf("second Run=%v, want ErrAlreadyRunning", err)
	}
	if _, err := second.Drain(ctx, conn2); !errors.Is(err, outbox.ErrAlreadyRunning) {
		t.Fatalf("second Drain=%v, want ErrAlreadyRunning", err)
	}

	close(release)
	waitDelivered(t, ctx, pool, id)
	cancel1()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first Run=%v, want context.Canceled", err)
	}
	// The first Run was cancelled mid-query, so pgx may have closed its
	// connection instead of unlocking: the backend then releases the
	// advisory lock when it exits, a moment later.
	for {
		n, err := second.Drain(ctx, conn2)
		if errors.Is(err, outbox.ErrAlreadyRunning) {
			select {
			case <-ctx.Done():
				t.Fatal("the first dispatcher's lock was never released")
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if err != nil || n != 0 {
			t.Fatalf("second Drain after the first stopped=%d, %v; want 0, nil", n, err)
		}
		break
	}
	if calls := recv.Calls(); len(calls) != 1 {
		t.Fatalf("%d calls, want 1", len(calls))
	}
}

func waitDelivered(t *testing.T, ctx context.Context, pool *pgxpool.Pool, id int64) {
	t.Helper()
	for {
		if lookup(t, ctx, pool, id).State == outbox.StateDelivered {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("command %d not delivered", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// drainAfterCrash runs a new dispatcher, waiting for the dead one's
// backend to release the advisory lock.
func drainAfterCrash(t *testing.T, ctx context.Context, deliver func(context.Context, outbox.Delivery) error) {
	t.Helper()
	conn := newConn(t)
	for {
		_, err := fastDispatcher(deliver).Drain(ctx, conn)
		if !errors.Is(err, outbox.ErrAlreadyRunning) {
			if err != nil {
				t.Fatalf("Drain after the crash: %v", err)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the crashed dispatcher's lock was never released")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkOnce checks that every command was delivered once, except the one
// in flight when the dispatcher crashed, delivered twice with the same key.
func checkOnce(t *testing.T, ctx context.Context, pool *pgxpool.Pool, calls []call, ids []int64, inFlight int64) {
	t.Helper()
	got := map[int64][]call{}
	for _, c := range calls {
		got[c.ID] = append(got[c.ID], c)
	}
	for _, id := range ids {
		cs := got[id]
		want := 1
		if id == inFlight {
			want = 2
		}
		if len(cs) != want {
			t.Errorf("command %d delivered %d times, want %d: %+v", id, len(cs), want, cs)
			continue
		}
		if want == 2 && (cs[0].Key != cs[1].Key || cs[0].Attempt != 1 || cs[1].Attempt != 2) {
			t.Errorf("repeated delivery of %d: %+v, want the same key on attempts 1 and 2", id, cs)
		}
		if e := lookup(t, ctx, pool, id); e.State != outbox.StateDelivered {
			t.Errorf("command %d: %s, want delivered", id, e.State)
		}
	}
	// Commands are delivered in id order, apart from the repeat.
	var last int64
	for _, c := range calls {
		if c.ID < last && c.ID != inFlight {
			t.Errorf("command %d delivered after %d", c.ID, last)
		}
		last = max(last, c.ID)
	}
}

// TestDispatcher_ConnectionLostAfterDelivery loses the dispatcher's
// connection (and with it the advisory lock) after the receiver accepted a
// command and before the dispatcher recorded it: the documented case. The
// next dispatcher repeats exactly that call, with the same key.
func TestDispatcher_ConnectionLostAfterDelivery(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	var ids []int64
	for i := range 8 {
		ids = append(ids, enqueue(t, ctx, pool, r, fence.Token(i+1)))
	}
	conn1 := newConn(t)
	var recv receiver
	var once sync.Once
	recv.after = func(c call) {
		if c.ID == ids[3] {
			once.Do(func() {
				if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", conn1.PgConn().PID()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	err := fastDispatcher(recv.Deliver).Run(ctx, conn1)
	if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "delivered again") {
		t.Fatalf("Run=%v, want the error of recording the delivery", err)
	}
	if e := lookup(t, ctx, pool, ids[3]); e.State != outbox.StatePending || e.Attempts != 1 {
		t.Fatalf("in-flight command: %+v, want pending after 1 attempt", e)
	}
	recv.after = nil
	drainAfterCrash(t, ctx, recv.Deliver)
	checkOnce(t, ctx, pool, recv.Calls(), ids, ids[3])
}

// TestDispatcher_CancelledAfterDelivery cancels the dispatcher's context
// while the receiver handles a call it then accepts: the dispatcher still
// records the delivery, and nothing is delivered twice.
func TestDispatcher_CancelledAfterDelivery(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	var ids []int64
	for i := range 8 {
		ids = append(ids, enqueue(t, ctx, pool, r, fence.Token(i+1)))
	}
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	var recv receiver
	recv.after = func(c call) {
		if c.ID == ids[3] {
			cancel1()
		}
	}
	if err := fastDispatcher(recv.Deliver).Run(ctx1, newConn(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run=%v, want context.Canceled", err)
	}
	if e := lookup(t, ctx, pool, ids[3]); e.State != outbox.StateDelivered {
		t.Fatalf("command accepted before the cancel: %s, want delivered", e.State)
	}
	if e := lookup(t, ctx, pool, ids[4]); e.State != outbox.StatePending || e.Attempts != 0 {
		t.Fatalf("next command: %+v, want pending, never attempted", e)
	}
	recv.after = nil
	drainAfterCrash(t, ctx, recv.Deliver)
	checkOnce(t, ctx, pool, recv.Calls(), ids, 0)
}

// TestDispatcher_DeliverFailsAfterReceiverActed: Deliver reports an error
// although the receiver acted (a timeout after the request arrived). The
// outbox cannot know; it retries with the same key.
func TestDispatcher_DeliverFailsAfterReceiverActed(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	id := enqueue(t, ctx, pool, uniqueName("r"), 1)
	var recv receiver
	d := fastDispatcher(func(ctx context.Context, dl outbox.Delivery) error {
		recv.Deliver(ctx, dl)
		if dl.Attempt == 1 {
			return errors.New("timeout waiting for the answer")
		}
		return nil
	})
	if _, err := d.Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, ctx, pool, recv.Calls(), []int64{id}, id)
}

// TestDispatcher_KilledProcess kills a dispatcher process (SIGKILL) while
// the receiver handles its call, then starts a new dispatcher: only that
// call is repeated, with the same key.
func TestDispatcher_KilledProcess(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	var ids []int64
	for i := range 6 {
		ids = append(ids, enqueue(t, ctx, pool, r, fence.Token(i+1)))
	}
	var recv receiver
	killNow, killed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	recv.after = func(c call) {
		if c.ID == ids[2] {
			once.Do(func() {
				close(killNow)
				<-killed // answer only once the dispatcher is dead
			})
		}
	}
	srv := newReceiverServer(t, &recv)

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "OUTBOX_HELPER_DISPATCHER=1", "OUTBOX_PG_URL="+pgURL, "OUTBOX_RECEIVER="+srv.URL)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-killNow:
	case err := <-exited:
		t.Fatalf("dispatcher process exited before the kill: %v\n%s", err, stderr.String())
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("dispatcher process never delivered command %d\n%s", ids[2], stderr.String())
	}
	cmd.Process.Kill()
	<-exited
	close(killed)

	if e := lookup(t, ctx, pool, ids[2]); e.State != outbox.StatePending || e.Attempts != 1 {
		t.Fatalf("command in flight at the kill: %+v, want pending after 1 attempt", e)
	}
	drainAfterCrash(t, ctx, httpDeliver(srv.URL))
	checkOnce(t, ctx, pool, recv.Calls(), ids, ids[2])
}

// TestDispatcher_ConcurrentEnqueue enqueues from many transactions at once
// while a dispatcher runs: every command is delivered once, and a
// resource's commands in id order, because Enqueue makes the transactions
// of one resource commit in id order.
func TestDispatcher_ConcurrentEnqueue(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	var recv receiver
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		d := fastDispatcher(recv.Deliver)
		d.PollInterval = time.Millisecond
		done <- d.Run(dctx, newConn(t))
	}()
	var mu sync.Mutex
	var ids []int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 15 {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					id, err := outbox.Enqueue(ctx, tx, outbox.Command{Resource: r, Token: 1})
					if err != nil {
						return err
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // commit late
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		waitDelivered(t, ctx, pool, id)
	}
	stop()
	<-done
	calls := recv.Calls()
	if len(calls) != len(ids) {
		t.Fatalf("%d calls for %d commands", len(calls), len(ids))
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].ID <= calls[i-1].ID {
			t.Fatalf("command %d delivered after %d", calls[i].ID, calls[i-1].ID)
		}
	}
}

func TestDispatcher_IssuerPinning(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	r := uniqueName("r")
	a := enqueue(t, guard.ContextWithIssuer(ctx, "cluster-a"), pool, r, 1)
	b := enqueue(t, guard.ContextWithIssuer(ctx, "cluster-b"), pool, r, 2)
	none := enqueue(t, ctx, pool, r, 3)
	var recv receiver
	d := fastDispatcher(recv.Deliver)
	d.Issuer = "cluster-a"
	if _, err := d.Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	if e := lookup(t, ctx, pool, a); e.State != outbox.StateDelivered || e.Issuer != "cluster-a" {
		t.Fatalf("command of cluster-a: %+v, want delivered", e)
	}
	for _, id := range []int64{b, none} {
		if e := lookup(t, ctx, pool, id); e.State != outbox.StateDropped || !strings.Contains(e.Reason, "issuer") {
			t.Fatalf("command %d: %+v, want dropped for its issuer", id, e)
		}
	}
	if calls := recv.Calls(); len(calls) != 1 || calls[0].ID != a {
		t.Fatalf("calls=%+v, want only %d", calls, a)
	}
}

func TestEnqueue_RolledBackIsNotDelivered(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Enqueue(ctx, tx, outbox.Command{Resource: uniqueName("r"), Token: 1}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	var recv receiver
	if n, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t)); err != nil || n != 0 || len(recv.Calls()) != 0 {
		t.Fatalf("Drain()=%d, %v with %d calls; want nothing to deliver", n, err, len(recv.Calls()))
	}
}

func TestEnqueue_InvalidArguments(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	var before, after int
	pool.QueryRow(ctx, "SELECT count(*) FROM fence_outbox").Scan(&before)
	for _, tt := range []struct {
		cmd  outbox.Command
		want error
	}{
		{outbox.Command{Resource: "r", Token: 0}, fence.ErrInvalidToken},
		{outbox.Command{Resource: "r", Token: fence.MaxToken + 1}, fence.ErrInvalidToken},
		{outbox.Command{Resource: "", Token: 1}, fence.ErrInvalidArgument},
	} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := outbox.Enqueue(ctx, tx, tt.cmd)
			return err
		})
		if !errors.Is(err, tt.want) {
			t.Errorf("Enqueue(%+v)=%v, want %v", tt.cmd, err, tt.want)
		}
	}
	pool.QueryRow(ctx, "SELECT count(*) FROM fence_outbox").Scan(&after)
	if after != before {
		t.Fatalf("outbox grew from %d to %d rows", before, after)
	}
	if _, err := fastDispatcher(nil).Drain(ctx, newConn(t)); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Drain without Deliver=%v, want ErrInvalidArgument", err)
	}
}

// TestEnqueue_UnderFencedTransaction enqueues in the worker's fenced
// transaction: a stale worker's state change and command both roll back.
func TestEnqueue_UnderFencedTransaction(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	clearOutbox(t, ctx, pool)
	g := postgres.New(pool)
	if err := g.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	order := uniqueName("order")
	work := func(tok fence.Token) error {
		return g.InTx(ctx, order, tok, func(tx pgx.Tx) error {
			_, err := outbox.Enqueue(ctx, tx, outbox.Command{Resource: order + "/email", Token: tok, Payload: []byte("shipped")})
			return err
		})
	}
	if err := work(5); err != nil {
		t.Fatal(err)
	}
	if err := work(4); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale worker: %v, want ErrStaleToken", err)
	}
	var recv receiver
	if _, err := fastDispatcher(recv.Deliver).Drain(ctx, newConn(t)); err != nil {
		t.Fatal(err)
	}
	if calls := recv.Calls(); len(calls) != 1 || calls[0].Key != order+"/email:5" {
		t.Fatalf("calls=%+v, want only the current holder's", calls)
	}
}

func TestLookup_NotFound(t *testing.T) {
	if _, err := outbox.Lookup(testCtx(t), newPool(t), -1); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Lookup(-1)=%v, want ErrNotFound", err)
	}
}

func TestMigrate_Idempotent(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- outbox.Migrate(ctx, pool) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
