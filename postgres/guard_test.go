package postgres_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/postgres"
)

// txTarget writes through Guard.Do, appending the value to a row of
// guard_values in the fenced transaction (TxFromContext). InTx is Do with
// the transaction handed to fn; the tests below use it.
type txTarget struct {
	g    *postgres.Guard
	pool *pgxpool.Pool
}

func (tg *txTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return tg.g.Do(ctx, object, t, func(ctx context.Context) error {
		tx, ok := postgres.TxFromContext(ctx)
		if !ok {
			return errors.New("apply's context has no transaction")
		}
		_, err := tx.Exec(ctx, `INSERT INTO guard_values AS v (object, value) VALUES ($1, $2)
ON CONFLICT (object) DO UPDATE SET value = v.value || ',' || EXCLUDED.value`, object, value)
		return err
	})
}

func (tg *txTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	var v string
	err := tg.pool.QueryRow(ctx, "SELECT value FROM guard_values WHERE object = $1", object).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", 0, err
	}
	mark, err := tg.g.Watermark(ctx, object)
	return v, mark, err
}

func (tg *txTarget) Appends() bool { return true }

func TestGuard_Conformance(t *testing.T) {
	pool := newPool(t)
	guardtest.Run(t, func(t *testing.T) guardtest.Target {
		return &txTarget{g: postgres.New(pool), pool: pool}
	})
	g := postgres.New(pool)
	t.Run("Guard", func(t *testing.T) { guardtest.RunGuard(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
	t.Run("Signed", func(t *testing.T) { guardtest.RunSigned(t, guardtest.Guard{Guard: g, Watermark: g.Watermark}) })
}

// checkTarget writes through Guard.Check alone and keeps the value in
// memory: it exercises the fence.Guard implementation.
type checkTarget struct {
	g      *postgres.Guard
	mu     sync.Mutex
	values map[string]string
}

func (tg *checkTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	// Check raises the watermark in its own transaction; the suite's
	// concurrent test needs the value written atomically with it, so this
	// target is run sequentially only.
	if err := tg.g.Check(ctx, object, t); err != nil {
		return err
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.values[object] = value
	return nil
}

func (tg *checkTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	tg.mu.Lock()
	v := tg.values[object]
	tg.mu.Unlock()
	mark, err := tg.g.Watermark(ctx, object)
	return v, mark, err
}

func TestGuard_Check(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := postgres.New(pool)
	obj := uniqueName("check")
	steps := []struct {
		token    fence.Token
		required fence.Token // 0: accepted
	}{{5, 0}, {5, 0}, {9, 0}, {7, 9}, {1, 9}, {9, 0}, {fence.MaxToken, 0}, {fence.MaxToken - 1, fence.MaxToken}}
	for i, st := range steps {
		err := g.Check(ctx, obj, st.token)
		if st.required == 0 {
			if err != nil {
				t.Fatalf("step %d: Check(%d)=%v, want accepted", i, st.token, err)
			}
			continue
		}
		var se *fence.StaleTokenError
		if !errors.As(err, &se) || se.Presented != st.token || se.Required != st.required || se.Object != obj {
			t.Fatalf("step %d: Check(%d)=%v, want StaleTokenError{%q, %d, %d}", i, st.token, err, obj, st.token, st.required)
		}
	}
	tg := &checkTarget{g: g, values: map[string]string{}}
	for i, tok := range []fence.Token{0, fence.MaxToken + 1} {
		if err := tg.Write(ctx, obj, tok, "x"); !errors.Is(err, fence.ErrInvalidToken) {
			t.Fatalf("%d: Check(%d)=%v, want ErrInvalidToken", i, uint64(tok), err)
		}
	}
	if mark, err := g.Watermark(ctx, obj); err != nil || mark != fence.MaxToken {
		t.Fatalf("Watermark()=%d, %v; want %d", mark, err, fence.MaxToken)
	}
}

func TestTxFromContext(t *testing.T) {
	if tx, ok := postgres.TxFromContext(context.Background()); ok || tx != nil {
		t.Fatalf("TxFromContext(no step)=%v, %v; want nil, false", tx, ok)
	}
}

func TestGuard_EmptyObject(t *testing.T) {
	g := postgres.New(newPool(t))
	called := false
	err := g.Do(testCtx(t), "", 1, func(context.Context) error { called = true; return nil })
	if !errors.Is(err, fence.ErrInvalidArgument) || called {
		t.Fatalf("Do(object \"\")=%v (apply called %v), want ErrInvalidArgument", err, called)
	}
}

func TestGuard_RollbackKeepsWatermark(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := postgres.New(pool)
	tg := &txTarget{g: g, pool: pool}
	obj := uniqueName("rollback")
	if err := tg.Write(ctx, obj, 5, "a"); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	err := g.InTx(ctx, obj, 9, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE guard_values SET value = 'lost' WHERE object = $1", obj); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("InTx=%v, want fn's error returned unchanged", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("InTx swallowed fn's panic")
			}
		}()
		g.InTx(ctx, obj, 10, func(tx pgx.Tx) error {
			tx.Exec(ctx, "UPDATE guard_values SET value = 'lost' WHERE object = $1", obj)
			panic("fn panics")
		})
	}()
	v, mark, err := tg.Read(ctx, obj)
	if err != nil || v != "a" || mark != 5 {
		t.Fatalf("after failed fn: Read()=%q, %d, %v; want %q, 5: the watermark and the writes must roll back together", v, mark, err, "a")
	}
	// Token 7 is still acceptable: 9 and 10 never took.
	if err := tg.Write(ctx, obj, 7, "b"); err != nil {
		t.Fatalf("Write(7) after rolled back 9: %v", err)
	}
}

func TestGuard_StaleDoesNotRunFn(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := postgres.New(pool)
	obj := uniqueName("stale")
	if err := g.Check(ctx, obj, 50); err != nil {
		t.Fatal(err)
	}
	called := false
	err := g.InTx(ctx, obj, 49, func(tx pgx.Tx) error { called = true; return nil })
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || se.Required != 50 || se.Presented != 49 {
		t.Fatalf("InTx(49)=%v, want StaleTokenError{Presented: 49, Required: 50}", err)
	}
	if called {
		t.Fatal("InTx ran fn for a stale token")
	}
}

func TestGuard_IssuerPinning(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := postgres.New(pool, postgres.WithIssuer("cluster-a"))
	obj := uniqueName("issuer")
	for _, tt := range []struct {
		name string
		ctx  context.Context
		ok   bool
	}{
		{"none presented", ctx, false},
		{"other issuer", guard.ContextWithIssuer(ctx, "cluster-b"), false},
		{"pinned issuer", guard.ContextWithIssuer(ctx, "cluster-a"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			err := g.InTx(tt.ctx, obj, 3, func(pgx.Tx) error { called = true; return nil })
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, fence.ErrIssuerMismatch)) || called != tt.ok {
				t.Fatalf("InTx=%v (fn called %v), want ok=%v or ErrIssuerMismatch", err, called, tt.ok)
			}
		})
	}
	if mark, _ := postgres.New(pool).Watermark(ctx, obj); mark != 3 {
		t.Fatalf("Watermark()=%d, want 3 (only the pinned issuer's call)", mark)
	}
}

// TestGuard_Savepoint runs InTx on a caller's transaction: the fenced part
// becomes a savepoint and commits only with the caller.
func TestGuard_Savepoint(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	obj := uniqueName("savepoint")
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := postgres.New(tx).Check(ctx, obj, 4); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := fence.Token(0)
		if commit {
			want = 4
		}
		if mark, err := postgres.New(pool).Watermark(ctx, obj); err != nil || mark != want {
			t.Fatalf("commit=%v: Watermark()=%d, %v; want %d", commit, mark, err, want)
		}
	}
}

// TestGuard_SerializesReadModifyWrite checks that InTx serialises the
// transactions of one object under READ COMMITTED: fn does a plain read,
// then a write of the value read plus one. Without the lock on the
// watermark row, concurrent increments would be lost.
func TestGuard_SerializesReadModifyWrite(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	g := postgres.New(pool)
	obj := uniqueName("counter")
	if _, err := pool.Exec(ctx, "INSERT INTO counters (name, n) VALUES ($1, 0)", obj); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	accepted := 0
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 25 {
				err := g.InTx(ctx, obj, fence.Token(1+rng.IntN(1000)), func(tx pgx.Tx) error {
					var n int64
					if err := tx.QueryRow(ctx, "SELECT n FROM counters WHERE name = $1", obj).Scan(&n); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "UPDATE counters SET n = $2 WHERE name = $1", obj, n+1)
					return err
				})
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Error(err)
					return
				}
				if err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	var n int
	if err := pool.QueryRow(ctx, "SELECT n FROM counters WHERE name = $1", obj).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != accepted {
		t.Fatalf("counter=%d, want %d (one per accepted transaction): updates were lost", n, accepted)
	}
}

func TestGuard_Migrate(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	table := uniqueName(`marks "quoted"; DROP TABLE docs; --`)
	g := postgres.New(pool, postgres.WithTable("public", table))
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- g.Migrate(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	if err := g.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if err := g.Check(ctx, "x", 3); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx, "x", 2); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Check(2)=%v, want stale", err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{"public", table}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in %q: %d, %v; want 1", table, n, err)
	}
	if _, err := pool.Exec(ctx, "SELECT 1 FROM docs LIMIT 1"); err != nil {
		t.Fatalf("table docs is gone: %v", err)
	}
	// The check constraint refuses a token of 0 even from raw SQL.
	if _, err := pool.Exec(ctx, "INSERT INTO fence_watermarks (object, token) VALUES ('zero', 0)"); err == nil {
		t.Fatal("fence_watermarks accepted token 0")
	}
}
