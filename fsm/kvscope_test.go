package fsm_test

import (
	"bytes"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// scopedPut is a kv write as a current server proposes it: scoped, with
// the scope its --kv-scope mapping gives the key ("" for none).
func scopedPut(m *fsm.Machine, key, mapped string, tok fence.Token) fsm.Result {
	return kvWrite(m, &statev1.KVWrite{Key: key, Value: []byte("v"), Token: uint64(tok), Scoped: true, Scope: mapped})
}

// grantOf acquires name for a new session and returns the session and the
// grant.
func grantFor(t *testing.T, m *fsm.Machine, name string) (uint64, fence.Grant) {
	t.Helper()
	s := createSession(t, m)
	res := acquire(m, s, 1, name, false)
	if !res.Granted {
		t.Fatalf("acquire %q: %+v", name, res)
	}
	return s, res.Grant
}

// refused checks that the write is refused with a scope mismatch naming
// the scope the token belongs to (empty: none) and the scope needed, and
// that it changed nothing (the snapshot is the same bytes).
func refused(t *testing.T, m *fsm.Machine, key, mapped string, tok fence.Token, wantKind fence.Kind, wantScope, wantRequired string) {
	t.Helper()
	before := mustSnapshot(t, m)
	res := scopedPut(m, key, mapped, tok)
	var sm *fence.ScopeMismatchError
	if !errors.As(res.Err, &sm) || !errors.Is(res.Err, fence.ErrScopeMismatch) {
		t.Fatalf("write %q with token %d: %v, want a scope mismatch", key, tok, res.Err)
	}
	want := fence.ScopeMismatchError{Object: key, Required: wantRequired, Presented: tok, Kind: wantKind, Scope: wantScope}
	if *sm != want {
		t.Fatalf("write %q: %+v, want %+v", key, *sm, want)
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatalf("refused write of %q changed the state", key)
	}
}

func accepted(t *testing.T, m *fsm.Machine, key, mapped string, tok fence.Token) {
	t.Helper()
	if res := scopedPut(m, key, mapped, tok); res.Err != nil {
		t.Fatalf("write %q with token %d: %v, want accepted", key, tok, res.Err)
	}
}

// The attacks of issue 12 on the kv: a token is authority only for the
// scope of the live grant that holds it.
func TestKVScope_Attacks(t *testing.T) {
	t.Run("holder of b writes a", func(t *testing.T) {
		m := newMachine(t)
		_, a := grantFor(t, m, "a")
		_, b := grantFor(t, m, "b")
		accepted(t, m, "a", "", a.Token)
		// b's token is above a's and above the watermark: fencing alone
		// would accept it.
		refused(t, m, "a", "", b.Token, fence.KindLock, "b", "a")
		if got := m.KV("a"); got.Token != a.Token {
			t.Fatalf("watermark of a = %d, want %d", got.Token, a.Token)
		}
	})
	t.Run("last token from Status", func(t *testing.T) {
		m := newMachine(t)
		_, a := grantFor(t, m, "a")
		accepted(t, m, "a", "", a.Token)
		grantFor(t, m, "other")
		refused(t, m, "a", "", m.LastToken(), fence.KindLock, "other", "a")
		// A token issued and since ended (here: the counter, after the
		// holder of "other" is gone) belongs to no grant.
		m2 := newMachine(t)
		s, _ := grantFor(t, m2, "x")
		release(m2, s, 2, "x")
		refused(t, m2, "a", "", m2.LastToken(), "", "", "a")
	})
	t.Run("string prefix is not a scope", func(t *testing.T) {
		m := newMachine(t)
		_, ord := grantFor(t, m, "ord")
		_, orders := grantFor(t, m, "orders")
		refused(t, m, "orders", "", ord.Token, fence.KindLock, "ord", "orders")
		refused(t, m, "orders2", "", orders.Token, fence.KindLock, "orders", "orders2")
		accepted(t, m, "orders", "", orders.Token)
		accepted(t, m, "orders/17", "", orders.Token) // a child of the scope
	})
	t.Run("child lock writes its parent", func(t *testing.T) {
		m := newMachine(t)
		_, child := grantFor(t, m, "orders/17")
		refused(t, m, "orders", "", child.Token, fence.KindLock, "orders/17", "orders")
		refused(t, m, "orders/18", "", child.Token, fence.KindLock, "orders/17", "orders/18")
		accepted(t, m, "orders/17", "", child.Token)
		accepted(t, m, "orders/17/line/1", "", child.Token)
	})
	t.Run("mapping to another scope", func(t *testing.T) {
		m := newMachine(t)
		_, cache := grantFor(t, m, "cache")
		_, billing := grantFor(t, m, "billing")
		// The leader mapped cache/... to billing: the key's own lock no
		// longer writes it, billing's does.
		refused(t, m, "cache/x", "billing", cache.Token, fence.KindLock, "cache", "billing")
		accepted(t, m, "cache/x", "billing", billing.Token)
		refused(t, m, "cache/y", "billing2", billing.Token, fence.KindLock, "billing", "billing2")
	})
	t.Run("released holder", func(t *testing.T) {
		m := newMachine(t)
		s, g := grantFor(t, m, "a")
		accepted(t, m, "a", "", g.Token)
		release(m, s, 2, "a")
		// Its token equals the watermark, so fencing would accept it.
		refused(t, m, "a", "", g.Token, "", "", "a")
	})
	t.Run("expired holder", func(t *testing.T) {
		m := newMachine(t)
		s, g := grantFor(t, m, "a")
		expire(m, s, 0)
		refused(t, m, "a", "", g.Token, "", "", "a")
		// The next holder writes; from then on the old token is below the
		// watermark and refused as stale, which it also is.
		_, next := grantFor(t, m, "a")
		accepted(t, m, "a", "", next.Token)
		if res := scopedPut(m, "a", "", g.Token); !errors.Is(res.Err, fence.ErrStaleToken) {
			t.Fatalf("expired holder after its successor wrote: %v, want stale", res.Err)
		}
	})
	t.Run("revoked holder", func(t *testing.T) {
		m := newMachine(t)
		_, g := grantFor(t, m, "a")
		m.Apply(&statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: "a"}}})
		refused(t, m, "a", "", g.Token, "", "", "a")
	})
}

// The rule survives snapshot and restore: the restored machine refuses
// the same writes, accepts the same, and ends in the same bytes.
func TestKVScope_SnapshotRestoreKeepsRule(t *testing.T) {
	m := newMachine(t)
	_, a := grantFor(t, m, "a")
	_, b := grantFor(t, m, "b")
	accepted(t, m, "a", "", a.Token)
	r := fsm.New(nil)
	if err := r.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustSnapshot(t, m), mustSnapshot(t, r)) {
		t.Fatal("restored snapshot differs")
	}
	for _, mm := range []*fsm.Machine{m, r} {
		refused(t, mm, "a", "", b.Token, fence.KindLock, "b", "a")
		accepted(t, mm, "a/1", "", a.Token)
	}
	if !bytes.Equal(mustSnapshot(t, m), mustSnapshot(t, r)) {
		t.Fatal("original and restored machine diverged")
	}
}

// Log entries written before the rule (scoped false) replay exactly as
// before: fencing by the watermark only, so a machine replaying an old log
// reaches the state the old version reached.
func TestKVScope_UnscopedEntriesReplayAsBefore(t *testing.T) {
	m := newMachine(t)
	s, a := grantFor(t, m, "a")
	_, b := grantFor(t, m, "b")
	for _, w := range []*statev1.KVWrite{
		{Key: "a", Value: []byte("1"), Token: uint64(b.Token)}, // another lock's token
		{Key: "zz", Value: []byte("2"), Token: uint64(a.Token)},
	} {
		if res := kvWrite(m, w); res.Err != nil {
			t.Fatalf("unscoped write %q: %v", w.GetKey(), res.Err)
		}
	}
	release(m, s, 2, "a")
	if res := kvWrite(m, &statev1.KVWrite{Key: "zz", Value: []byte("3"), Token: uint64(a.Token)}); res.Err != nil {
		t.Fatalf("unscoped write with a released token: %v", res.Err)
	}
	if res := kvWrite(m, &statev1.KVWrite{Key: "a", Value: []byte("4"), Token: uint64(a.Token)}); !errors.Is(res.Err, fence.ErrStaleToken) {
		t.Fatalf("unscoped stale write: %v, want stale", res.Err)
	}
}

// A retried write (same request id) is answered with its original result
// even after the grant ended: it was applied while the token was in force.
func TestKVScope_RetryAfterReleaseKeepsResult(t *testing.T) {
	m := newMachine(t)
	s, g := grantFor(t, m, "a")
	w := &statev1.KVWrite{Key: "a", Value: []byte("v"), Token: uint64(g.Token), Scoped: true, RequestId: "r1"}
	first := kvWrite(m, w)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	release(m, s, 2, "a")
	if again := kvWrite(m, w); again.Err != nil || again.KV != first.KV {
		t.Fatalf("retry: %+v, want %+v", again, first)
	}
	w.RequestId = "r2"
	if res := kvWrite(m, w); !errors.Is(res.Err, fence.ErrScopeMismatch) {
		t.Fatalf("new write after release: %v, want a scope mismatch", res.Err)
	}
}

// A scope without the scoped flag, or an invalid scope, is refused and
// changes nothing.
func TestKVScope_BadScopeChangesNothing(t *testing.T) {
	m := newMachine(t)
	_, g := grantFor(t, m, "a")
	before := mustSnapshot(t, m)
	for _, w := range []*statev1.KVWrite{
		{Key: "a", Token: uint64(g.Token), Scope: "a"},
		{Key: "a", Token: uint64(g.Token), Scoped: true, Scope: "bad\x00scope"},
	} {
		if res := kvWrite(m, w); !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Errorf("write %+v: %v, want invalid argument", w, res.Err)
		}
	}
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("refused writes changed the state")
	}
}
