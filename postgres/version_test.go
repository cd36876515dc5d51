package postgres_test

import (
	"errors"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/postgres"
)

var nextAccount struct {
	sync.Mutex
	id int64
}

func newAccount(t *testing.T, version, token int64) int64 {
	t.Helper()
	nextAccount.Lock()
	nextAccount.id++
	id := nextAccount.id
	nextAccount.Unlock()
	pool := newPool(t)
	if _, err := pool.Exec(testCtx(t), "INSERT INTO accounts (id, owner, balance, version, fencing_token) VALUES ($1, 'ann', 100, $2, $3)", id, version, token); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestUpdateVersioned(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	for _, tt := range []struct {
		name            string
		missing         bool
		expected        int64
		token           fence.Token
		wantVersion     int64
		stale, mismatch bool
	}{
		{name: "applied", expected: 3, token: 10, wantVersion: 4},
		{name: "equal token applied", expected: 3, token: 9, wantVersion: 4},
		{name: "version mismatch", expected: 2, token: 10, mismatch: true},
		{name: "stale token", expected: 3, token: 8, stale: true},
		{name: "stale token wins over version mismatch", expected: 1, token: 8, stale: true},
		{name: "missing row", missing: true, expected: 3, token: 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := newAccount(t, 3, 9)
			if tt.missing {
				id = -id
			}
			v, err := postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{
				FencedUpdate: postgres.FencedUpdate{
					Table: "accounts", KeyColumn: "id", Key: id,
					Set:    map[string]any{"owner": "bob"},
					SetSQL: `"balance" = "balance" + $1`, SetArgs: []any{5},
				},
				Expected: tt.expected,
			}, tt.token)
			var se *fence.StaleTokenError
			var vm *fence.VersionMismatchError
			switch {
			case tt.missing:
				if !errors.Is(err, postgres.ErrNotFound) {
					t.Fatalf("UpdateVersioned=%v, want ErrNotFound", err)
				}
				return
			case tt.stale:
				if !errors.As(err, &se) || se.Required != 9 || se.Presented != tt.token || errors.Is(err, fence.ErrVersionMismatch) {
					t.Fatalf("UpdateVersioned=%v, want StaleTokenError{Presented: %d, Required: 9}", err, tt.token)
				}
			case tt.mismatch:
				if !errors.As(err, &vm) || !errors.Is(err, fence.ErrVersionMismatch) || vm.Current != 3 || vm.Expected != tt.expected {
					t.Fatalf("UpdateVersioned=%v, want VersionMismatchError{Expected: %d, Current: 3}", err, tt.expected)
				}
			default:
				if err != nil || v != tt.wantVersion {
					t.Fatalf("UpdateVersioned=%d, %v; want version %d", v, err, tt.wantVersion)
				}
			}
			var owner string
			var balance, version, tok int64
			if err := pool.QueryRow(ctx, "SELECT owner, balance, version, fencing_token FROM accounts WHERE id = $1", id).Scan(&owner, &balance, &version, &tok); err != nil {
				t.Fatal(err)
			}
			want := [4]any{"ann", int64(100), int64(3), int64(9)}
			if err == nil && !tt.stale && !tt.mismatch {
				want = [4]any{"bob", int64(105), tt.wantVersion, int64(tt.token)}
			}
			if got := [4]any{owner, balance, version, tok}; got != want {
				t.Fatalf("row=%v, want %v", got, want)
			}
		})
	}
}

// TestUpdateVersioned_Concurrent: of writers that all read version 1,
// exactly one wins; the others learn the current version.
func TestUpdateVersioned_Concurrent(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	id := newAccount(t, 1, 1)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[w] = postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{
				FencedUpdate: postgres.FencedUpdate{Table: "accounts", KeyColumn: "id", Key: id,
					SetSQL: `"balance" = "balance" - 10`},
				Expected: 1,
			}, 2)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var vm *fence.VersionMismatchError
		switch {
		case err == nil:
			won++
		case errors.As(err, &vm) && vm.Current == 2:
		default:
			t.Fatalf("UpdateVersioned=%v, want nil or VersionMismatchError{Current: 2}", err)
		}
	}
	var balance int64
	pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = $1", id).Scan(&balance)
	if won != 1 || balance != 90 {
		t.Fatalf("%d writers won, balance %d; want exactly 1 and 90", won, balance)
	}
}

func TestUpdateVersioned_InvalidArgument(t *testing.T) {
	pool := newPool(t)
	ctx := testCtx(t)
	_, err := postgres.UpdateVersioned(ctx, pool, postgres.VersionedUpdate{
		FencedUpdate: postgres.FencedUpdate{Table: "accounts", KeyColumn: "id", Key: 1, Set: map[string]any{"version": 7}},
		Expected:     1,
	}, 1)
	if !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("UpdateVersioned setting the version column=%v, want ErrInvalidArgument", err)
	}
}
