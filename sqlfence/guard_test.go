package sqlfence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/postgres"
	"github.com/fenced-dev/fenced/sqlfence"
)

// target writes through Guard.Do, appending the value to a row of
// fence_test_values in the fenced transaction (TxFromContext). InTx is Do
// with the transaction handed to fn; the tests below use it.
type target struct {
	g      *sqlfence.Guard
	db     *sql.DB
	append string
}

func (tg *target) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return tg.g.Do(ctx, object, t, func(ctx context.Context) error {
		tx, ok := sqlfence.TxFromContext(ctx)
		if !ok {
			return errors.New("apply's context has no transaction")
		}
		_, err := tx.ExecContext(ctx, tg.append, object, value)
		return err
	})
}

func (tg *target) Read(ctx context.Context, object string) (string, fence.Token, error) {
	var v string
	q := "SELECT value FROM fence_test_values WHERE object = ?"
	if tg.g.Dialect() == sqlfence.Postgres {
		q = "SELECT value FROM fence_test_values WHERE object = $1"
	}
	err := tg.db.QueryRowContext(ctx, q, object).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", 0, err
	}
	mark, err := tg.g.Watermark(ctx, object)
	return v, mark, err
}

func (tg *target) Appends() bool { return true }

func newTarget(t testing.TB, b backend, opts ...sqlfence.Option) *target {
	db := b.open(t)
	g, err := sqlfence.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &target{g: g, db: db, append: b.append}
}

func TestGuard_Conformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tg := newTarget(t, b)
			guardtest.Run(t, func(t *testing.T) guardtest.Target { return tg })
			t.Run("Guard", func(t *testing.T) { guardtest.RunGuard(t, guardtest.Guard{Guard: tg.g, Watermark: tg.g.Watermark}) })
			t.Run("Signed", func(t *testing.T) { guardtest.RunSigned(t, guardtest.Guard{Guard: tg.g, Watermark: tg.g.Watermark}) })
		})
	}
}

// TestGuard_SerializesReadModifyWrite checks that InTx serialises the
// transactions of one object: fn reads a counter and writes it back plus
// one, with several connections at once. Lost increments would show a
// check-then-write race; on SQLite, a transaction that read before it took
// the write lock would fail with SQLITE_BUSY instead.
func TestGuard_SerializesReadModifyWrite(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tg := newTarget(t, b)
			ctx := testCtx(t)
			obj := uniqueName("counter")
			sel, upd, ins := "SELECT n FROM fence_test_counters WHERE name = ?", "UPDATE fence_test_counters SET n = ? WHERE name = ?", "INSERT INTO fence_test_counters (name, n) VALUES (?, 0)"
			if tg.g.Dialect() == sqlfence.Postgres {
				sel, upd, ins = "SELECT n FROM fence_test_counters WHERE name = $1", "UPDATE fence_test_counters SET n = $1 WHERE name = $2", "INSERT INTO fence_test_counters (name, n) VALUES ($1, 0)"
			}
			if _, err := tg.db.ExecContext(ctx, ins, obj); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			accepted := 0
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 11))
					for range 25 {
						err := tg.g.InTx(ctx, obj, fence.Token(1+rng.IntN(1000)), func(tx *sql.Tx) error {
							var n int64
							if err := tx.QueryRowContext(ctx, sel, obj).Scan(&n); err != nil {
								return err
							}
							_, err := tx.ExecContext(ctx, upd, n+1, obj)
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
			if err := tg.db.QueryRowContext(ctx, sel, obj).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != accepted {
				t.Fatalf("counter=%d, want %d (one per accepted transaction): updates were lost", n, accepted)
			}
		})
	}
}

func TestGuard_RollbackKeepsWatermark(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tg := newTarget(t, b)
			ctx := testCtx(t)
			obj := uniqueName("rollback")
			if err := tg.Write(ctx, obj, 5, "a"); err != nil {
				t.Fatal(err)
			}
			errBoom := errors.New("boom")
			err := tg.g.InTx(ctx, obj, 9, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, tg.append, obj, "lost"); err != nil {
					return err
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				t.Fatalf("InTx=%v, want fn's error returned unchanged", err)
			}
			v, mark, err := tg.Read(ctx, obj)
			if err != nil || v != "a" || mark != 5 {
				t.Fatalf("after failed fn: Read()=%q, %d, %v; want %q, 5", v, mark, err, "a")
			}
			called := false
			err = tg.g.InTx(ctx, obj, 4, func(*sql.Tx) error { called = true; return nil })
			var se *fence.StaleTokenError
			if !errors.As(err, &se) || se.Presented != 4 || se.Required != 5 || se.Object != obj || called {
				t.Fatalf("InTx(4)=%v (fn called %v), want StaleTokenError{%q, 4, 5} without calling fn", err, called, obj)
			}
			if err := tg.g.Check(ctx, obj, 7); err != nil {
				t.Fatalf("Check(7) after rolled back 9: %v", err)
			}
		})
	}
}

func TestGuard_IssuerPinning(t *testing.T) {
	tg := newTarget(t, backends[0], sqlfence.WithIssuer("cluster-a"))
	ctx := testCtx(t)
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
			err := tg.g.Check(tt.ctx, obj, 3)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, fence.ErrIssuerMismatch)) {
				t.Fatalf("Check=%v, want ok=%v or ErrIssuerMismatch", err, tt.ok)
			}
		})
	}
	if mark, _ := tg.g.Watermark(ctx, obj); mark != 3 {
		t.Fatalf("Watermark()=%d, want 3", mark)
	}
}

func TestGuard_InvalidObject(t *testing.T) {
	tg := newTarget(t, backends[0])
	if err := tg.g.Check(testCtx(t), "", 1); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Check(\"\")=%v, want ErrInvalidArgument", err)
	}
}

func TestGuard_Migrate(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t) // migrates once
			g, err := sqlfence.New(db)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() { defer wg.Done(); errs <- g.Migrate(testCtx(t)) }()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("Migrate again: %v", err)
				}
			}
			// The check constraint refuses token 0 even from raw SQL.
			q := "INSERT INTO fence_watermarks (object, token) VALUES ('zero', 0)"
			if _, err := db.ExecContext(testCtx(t), q); err == nil {
				t.Fatal("fence_watermarks accepted token 0")
			}
		})
	}
}

// TestMigrationSQL_SameAsPostgresPackage keeps the PostgreSQL table of
// both packages the same, so that both can guard the same objects.
func TestMigrationSQL_SameAsPostgresPackage(t *testing.T) {
	if sqlfence.PostgresMigrationSQL != postgres.MigrationSQL {
		t.Fatalf("PostgresMigrationSQL=\n%s\nwant postgres.MigrationSQL=\n%s", sqlfence.PostgresMigrationSQL, postgres.MigrationSQL)
	}
}

type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not a database") }

func init() { sql.Register("sqlfence-test-unknown", unknownDriver{}) }

func TestDetect(t *testing.T) {
	for _, tt := range []struct {
		driver string
		want   sqlfence.Dialect
	}{
		{"sqlite", sqlfence.SQLite},
		{"pgx", sqlfence.Postgres},
		{"sqlfence-test-unknown", 0},
	} {
		t.Run(tt.driver, func(t *testing.T) {
			db, err := sql.Open(tt.driver, "")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			got, err := sqlfence.Detect(db)
			if tt.want == 0 {
				if !errors.Is(err, fence.ErrInvalidArgument) {
					t.Fatalf("Detect()=%v, %v; want ErrInvalidArgument", got, err)
				}
				if _, err := sqlfence.New(db); !errors.Is(err, fence.ErrInvalidArgument) {
					t.Fatalf("New()=%v; want ErrInvalidArgument", err)
				}
				g, err := sqlfence.New(db, sqlfence.WithDialect(sqlfence.Postgres))
				if err != nil || g.Dialect() != sqlfence.Postgres {
					t.Fatalf("New(WithDialect(Postgres))=%v, %v", g, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Detect()=%v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := sqlfence.New(nil, sqlfence.WithDialect(sqlfence.Dialect(9))); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("New(WithDialect(9))=%v, want ErrInvalidArgument", err)
	}
}

func TestTxFromContext(t *testing.T) {
	if tx, ok := sqlfence.TxFromContext(context.Background()); ok || tx != nil {
		t.Fatalf("TxFromContext(no step)=%v, %v; want nil, false", tx, ok)
	}
}
