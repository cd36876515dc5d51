package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/postgres"
)

// updateTarget writes rows of docs with postgres.Update, appending the
// value in the same statement (SetSQL). The row's fencing_token column is
// its watermark.
type updateTarget struct{ pool *pgxpool.Pool }

func (tg *updateTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	// The row must exist for an UPDATE; a new one has no watermark (NULL).
	if _, err := tg.pool.Exec(ctx, "INSERT INTO docs (id) VALUES ($1) ON CONFLICT DO NOTHING", object); err != nil {
		return err
	}
	return postgres.Update(ctx, tg.pool, postgres.FencedUpdate{
		Table:     "docs",
		KeyColumn: "id",
		Key:       object,
		SetSQL:    `"value" = CASE WHEN "value" = '' THEN $1 ELSE "value" || ',' || $1 END`,
		SetArgs:   []any{value},
	}, t)
}

func (tg *updateTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	return readRow(ctx, tg.pool, "docs", object)
}

func (tg *updateTarget) Appends() bool { return true }

func readRow(ctx context.Context, pool *pgxpool.Pool, table, id string) (string, fence.Token, error) {
	var v *string
	var mark *int64
	err := pool.QueryRow(ctx, "SELECT value, fencing_token FROM "+table+" WHERE id = $1", id).Scan(&v, &mark)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	var value string
	if v != nil {
		value = *v
	}
	if mark == nil {
		return value, 0, nil
	}
	return value, fence.Token(*mark), nil
}

func TestUpdate_Conformance(t *testing.T) {
	pool := newPool(t)
	guardtest.Run(t, func(t *testing.T) guardtest.Target { return &updateTarget{pool: pool} })
}

// upsertTarget writes rows of kv with postgres.Upsert, replacing the value.
type upsertTarget struct{ pool *pgxpool.Pool }

func (tg *upsertTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return postgres.Upsert(ctx, tg.pool, postgres.FencedUpdate{
		Table: "kv", KeyColumn: "id", Key: object,
		Set: map[string]any{"value": value},
	}, t)
}

func (tg *upsertTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	return readRow(ctx, tg.pool, "kv", object)
}

func TestUpsert_Conformance(t *testing.T) {
	pool := newPool(t)
	guardtest.Run(t, func(t *testing.T) guardtest.Target { return &upsertTarget{pool: pool} })
}

func TestUpdate_NotFound(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	err := postgres.Update(ctx, pool, postgres.FencedUpdate{
		Table: "docs", KeyColumn: "id", Key: uniqueName("missing"),
		Set: map[string]any{"value": "x"},
	}, 5)
	if !errors.Is(err, postgres.ErrNotFound) || errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Update(missing row)=%v, want ErrNotFound", err)
	}
}

func TestUpdate_StaleReportsRequired(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := uniqueName("doc")
	if _, err := pool.Exec(ctx, "INSERT INTO docs (id, value, fencing_token) VALUES ($1, 'v', 40)", id); err != nil {
		t.Fatal(err)
	}
	u := postgres.FencedUpdate{Table: "docs", KeyColumn: "id", Key: id, Set: map[string]any{"value": "late"}}
	err := postgres.Update(ctx, pool, u, 39)
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || se.Presented != 39 || se.Required != 40 || se.Object != "docs/"+id {
		t.Fatalf("Update(39)=%v, want StaleTokenError{docs/%s, 39, 40}", err, id)
	}
	if v, mark, _ := readRow(ctx, pool, "docs", id); v != "v" || mark != 40 {
		t.Fatalf("row=%q, %d after a stale update; want unchanged %q, 40", v, mark, "v")
	}
}

func TestUpdate_InvalidTokenChangesNothing(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := uniqueName("doc")
	if _, err := pool.Exec(ctx, "INSERT INTO kv (id, value, fencing_token) VALUES ($1, 'v', 3)", id); err != nil {
		t.Fatal(err)
	}
	u := postgres.FencedUpdate{Table: "kv", KeyColumn: "id", Key: id, Set: map[string]any{"value": "bad"}}
	for _, tok := range []fence.Token{0, fence.MaxToken + 1, ^fence.Token(0)} {
		for name, call := range map[string]func() error{
			"Update": func() error { return postgres.Update(ctx, pool, u, tok) },
			"Upsert": func() error { return postgres.Upsert(ctx, pool, u, tok) },
			"UpdateVersioned": func() error {
				_, err := postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{FencedUpdate: u, VersionColumn: "value", Expected: 1}, tok)
				return err
			},
		} {
			if err := call(); !errors.Is(err, fence.ErrInvalidToken) {
				t.Errorf("%s(token %d)=%v, want ErrInvalidToken", name, uint64(tok), err)
			}
		}
	}
	if v, mark, _ := readRow(ctx, pool, "kv", id); v != "v" || mark != 3 {
		t.Fatalf("row=%q, %d after invalid tokens; want unchanged", v, mark)
	}
}

func TestUpdate_IssuerPinning(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := uniqueName("doc")
	u := postgres.FencedUpdate{Table: "kv", KeyColumn: "id", Key: id, Set: map[string]any{"value": "x"}, Issuer: "cluster-a"}
	if err := postgres.Upsert(ctx, pool, u, 5); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("Upsert without issuer=%v, want ErrIssuerMismatch", err)
	}
	if err := postgres.Update(guard.ContextWithIssuer(ctx, "cluster-b"), pool, u, 5); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("Update from cluster-b=%v, want ErrIssuerMismatch", err)
	}
	if err := postgres.Upsert(guard.ContextWithIssuer(ctx, "cluster-a"), pool, u, 5); err != nil {
		t.Fatalf("Upsert from cluster-a=%v, want accepted", err)
	}
	if _, mark, _ := readRow(ctx, pool, "kv", id); mark != 5 {
		t.Fatalf("watermark=%d, want 5", mark)
	}
}

func TestUpdate_InvalidArgument(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	for _, tt := range []struct {
		name string
		u    postgres.FencedUpdate
	}{
		{"no table", postgres.FencedUpdate{KeyColumn: "id", Key: "a"}},
		{"no key column", postgres.FencedUpdate{Table: "kv", Key: "a"}},
		{"sets the token column", postgres.FencedUpdate{Table: "kv", KeyColumn: "id", Key: "a", Set: map[string]any{"fencing_token": 1}}},
		{"empty column name", postgres.FencedUpdate{Table: "kv", KeyColumn: "id", Key: "a", Set: map[string]any{"": 1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := postgres.Update(ctx, pool, tt.u, 1); !errors.Is(err, fence.ErrInvalidArgument) {
				t.Fatalf("Update=%v, want ErrInvalidArgument", err)
			}
		})
	}
	u := postgres.FencedUpdate{Table: "kv", KeyColumn: "id", Key: "a", SetSQL: `"value" = 'x'`}
	if err := postgres.Upsert(ctx, pool, u, 1); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("Upsert with SetSQL=%v, want ErrInvalidArgument", err)
	}
}

// TestUpdate_IdentifierQuoting writes through identifiers that would be SQL
// if they were not quoted, and a key that would be SQL if it were not a
// parameter.
func TestUpdate_IdentifierQuoting(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	schema := uniqueName(`s"; DROP TABLE docs; --`)
	table := `t"; DROP TABLE kv; --`
	keyCol := `id" = id OR 1=1; --`
	valCol := `Value"; DELETE FROM docs; --`
	tokCol := `tok"en`
	create := "CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize() + "; CREATE TABLE " + pgx.Identifier{schema, table}.Sanitize() +
		" (" + pgx.Identifier{keyCol}.Sanitize() + " text PRIMARY KEY, " + pgx.Identifier{valCol}.Sanitize() + " text, " +
		pgx.Identifier{tokCol}.Sanitize() + " bigint)"
	if _, err := pool.Exec(ctx, create); err != nil {
		t.Fatal(err)
	}
	var docsBefore int
	pool.QueryRow(ctx, "SELECT count(*) FROM docs").Scan(&docsBefore)
	u := postgres.FencedUpdate{
		Schema: schema, Table: table, KeyColumn: keyCol, TokenColumn: tokCol,
		Key: "k'; DROP TABLE docs; --", Set: map[string]any{valCol: "v1"},
	}
	if err := postgres.Upsert(ctx, pool, u, 7); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	u.Set = map[string]any{valCol: "v2"}
	if err := postgres.Update(ctx, pool, u, 8); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := postgres.Update(ctx, pool, u, 6); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Update(6)=%v, want stale", err)
	}
	other := u
	other.Key = "other"
	if err := postgres.Update(ctx, pool, other, 9); !errors.Is(err, postgres.ErrNotFound) {
		t.Fatalf("Update(other key)=%v, want ErrNotFound", err)
	}
	var v string
	var tok int64
	q := "SELECT " + pgx.Identifier{valCol}.Sanitize() + ", " + pgx.Identifier{tokCol}.Sanitize() + " FROM " + pgx.Identifier{schema, table}.Sanitize()
	if err := pool.QueryRow(ctx, q).Scan(&v, &tok); err != nil || v != "v2" || tok != 8 {
		t.Fatalf("row=%q, %d, %v; want v2, 8", v, tok, err)
	}
	var docsAfter int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM docs").Scan(&docsAfter); err != nil || docsAfter < docsBefore {
		t.Fatalf("docs: %d rows, %v; it had %d", docsAfter, err, docsBefore)
	}
	if _, err := pool.Exec(ctx, "SELECT 1 FROM kv"); err != nil {
		t.Fatalf("table kv: %v", err)
	}
}

// TestUpdate_InCallerTransaction runs Update in the caller's transaction:
// it commits or rolls back with it.
func TestUpdate_InCallerTransaction(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := uniqueName("doc")
	if _, err := pool.Exec(ctx, "INSERT INTO docs (id, value, fencing_token) VALUES ($1, 'v', 1)", id); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := postgres.FencedUpdate{Table: "docs", KeyColumn: "id", Key: id, Set: map[string]any{"value": "in tx"}}
	if err := postgres.Update(ctx, tx, u, 2); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	if v, mark, _ := readRow(ctx, pool, "docs", id); v != "v" || mark != 1 {
		t.Fatalf("row=%q, %d after rollback; want v, 1", v, mark)
	}
}

// TestUpdate_ConcurrentRowCreation races Update against the creation of
// its row: each Update either finds no row or is applied, never a wrong
// stale error.
func TestUpdate_ConcurrentRowCreation(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	for i := range 20 {
		id := uniqueName("race")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for w := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[w] = postgres.Update(ctx, pool, postgres.FencedUpdate{
					Table: "docs", KeyColumn: "id", Key: id, Set: map[string]any{"value": "w"},
				}, 5)
			}()
		}
		if _, err := pool.Exec(ctx, "INSERT INTO docs (id) VALUES ($1)", id); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil && !errors.Is(err, postgres.ErrNotFound) {
				t.Fatalf("round %d, writer %d: Update=%v, want nil or ErrNotFound", i, w, err)
			}
		}
	}
}

func TestUpdate_ErrorMessages(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	err := postgres.Update(ctx, pool, postgres.FencedUpdate{Table: "docs", KeyColumn: "id", Key: "nope", Set: map[string]any{"value": "x"}}, 1)
	if err == nil || !strings.Contains(err.Error(), `"docs"`) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("not-found error %q does not name the table and key", err)
	}
}

// execHook runs after the first Exec of the Querier it wraps.
type execHook struct {
	postgres.Querier
	calls int
	after func()
}

func (h *execHook) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := h.Querier.Exec(ctx, sql, args...)
	h.calls++
	if h.calls == 1 {
		h.after()
	}
	return tag, err
}

// TestUpdate_RowAppearsAfterSnapshot makes the row appear between the
// UPDATE (which does not see it) and the read-back (which does): Update
// must not call that stale or missing, but run the statement again.
func TestUpdate_RowAppearsAfterSnapshot(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := uniqueName("late")
	creator, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer creator.Rollback(ctx)
	if _, err := creator.Exec(ctx, "INSERT INTO docs (id, value, fencing_token) VALUES ($1, 'old', 3)", id); err != nil {
		t.Fatal(err)
	}
	h := &execHook{Querier: pool, after: func() {
		if err := creator.Commit(ctx); err != nil {
			t.Error(err)
		}
	}}
	err = postgres.Update(ctx, h, postgres.FencedUpdate{Table: "docs", KeyColumn: "id", Key: id, Set: map[string]any{"value": "new"}}, 5)
	if err != nil || h.calls != 2 {
		t.Fatalf("Update=%v after %d statements, want applied on the second", err, h.calls)
	}
	if v, mark, _ := readRow(ctx, pool, "docs", id); v != "new" || mark != 5 {
		t.Fatalf("row=%q, %d; want new, 5", v, mark)
	}
}
