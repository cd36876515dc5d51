package fsm_test

import (
	"bytes"
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

var (
	ownerHash    = fsm.HashSecret([]byte("0123456789abcdef"))
	attackerHash = fsm.HashSecret([]byte("0123456789abcdeX"))
)

func createOwned(t *testing.T, m *fsm.Machine, requestID string, hash []byte) uint64 {
	t.Helper()
	res := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000, RequestId: requestID, SecretHash: hash}}})
	if res.Err != nil {
		t.Fatalf("create session: %v", res.Err)
	}
	return res.Session
}

func acquireAs(m *fsm.Machine, session, seq uint64, name string, hash []byte) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: session, Seq: seq, Name: name, Wait: true, SecretHash: hash}}})
}

func releaseAs(m *fsm.Machine, session, seq uint64, name string, hash []byte) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: session, Seq: seq, Name: name, SecretHash: hash}}})
}

func closeAs(m *fsm.Machine, session uint64, hash []byte) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_CloseSession{CloseSession: &statev1.CloseSession{Session: session, SecretHash: hash}}})
}

// Every command that acts for a session is refused unless it carries the
// hash of the session's secret, and a refused one changes nothing.
func TestSecret_WrongOrMissingSecretChangesNothing(t *testing.T) {
	m := newMachine(t)
	s := createOwned(t, m, "", ownerHash)
	if res := acquireAs(m, s, 1, "x", ownerHash); !res.Granted {
		t.Fatalf("owner's acquire: %+v", res)
	}
	before := mustSnapshot(t, m)
	for _, hash := range [][]byte{attackerHash, nil} {
		for name, cmd := range map[string]func() fsm.Result{
			"acquire": func() fsm.Result { return acquireAs(m, s, 2, "y", hash) },
			"retry":   func() fsm.Result { return acquireAs(m, s, 1, "x", hash) },
			"release": func() fsm.Result { return releaseAs(m, s, 3, "x", hash) },
			"close":   func() fsm.Result { return closeAs(m, s, hash) },
		} {
			if res := cmd(); !errors.Is(res.Err, fence.ErrNotOwner) {
				t.Errorf("%s with hash %x: %+v, want ErrNotOwner", name, hash, res)
			}
			if err := m.CheckOwner(s, hash); !errors.Is(err, fence.ErrNotOwner) {
				t.Errorf("CheckOwner(%x) = %v, want ErrNotOwner", hash, err)
			}
			if !bytes.Equal(mustSnapshot(t, m), before) {
				t.Fatalf("%s with hash %x changed the state", name, hash)
			}
		}
	}
	if res := m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: s, Seq: 3, Name: "x", SecretHash: []byte("short")}}}); !errors.Is(res.Err, fence.ErrInvalidArgument) {
		t.Errorf("a hash of the wrong length: %v, want ErrInvalidArgument", res.Err)
	}
	if err := m.CheckOwner(s, ownerHash); err != nil {
		t.Fatalf("CheckOwner(owner) = %v", err)
	}
	if err := m.CheckOwner(99, ownerHash); !errors.Is(err, fence.ErrSessionNotFound) {
		t.Fatalf("CheckOwner(unknown session) = %v", err)
	}
	if res := releaseAs(m, s, 3, "x", ownerHash); res.Err != nil || res.Release != fsm.Released {
		t.Fatalf("owner's release: %+v", res)
	}
	if res := closeAs(m, s, ownerHash); res.Err != nil || !res.Ended {
		t.Fatalf("owner's close: %+v", res)
	}
}

// A request id is no proof of ownership: a create (or per-grant acquire)
// retried with the same request id returns the session only with the same
// secret.
func TestSecret_RetriedCreateNeedsTheSameSecret(t *testing.T) {
	m := newMachine(t)
	s := createOwned(t, m, "r1", ownerHash)
	if again := createOwned(t, m, "r1", ownerHash); again != s {
		t.Fatalf("retry created session %d, want %d", again, s)
	}
	res := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 1000, RequestId: "r1", SecretHash: attackerHash}}})
	if !errors.Is(res.Err, fence.ErrNotOwner) {
		t.Fatalf("create with another secret: %+v, want ErrNotOwner", res)
	}

	oneShot := func(hash []byte) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "p", TtlMs: 1000, RequestId: "r2", SecretHash: hash}}})
	}
	first := oneShot(ownerHash)
	if !first.Granted {
		t.Fatalf("per-grant acquire: %+v", first)
	}
	before := mustSnapshot(t, m)
	if res := oneShot(attackerHash); !errors.Is(res.Err, fence.ErrNotOwner) {
		t.Fatalf("per-grant retry with another secret: %+v, want ErrNotOwner", res)
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("a refused retry changed the state")
	}
	if res := oneShot(ownerHash); !res.Granted || res.Grant.Token != first.Grant.Token {
		t.Fatalf("per-grant retry with the secret: %+v, want %+v", res, first)
	}
	if err := m.CheckOwner(first.Session, ownerHash); err != nil {
		t.Fatalf("the per-grant session does not have the secret: %v", err)
	}
}

// A session from before secrets (no hash) accepts only commands without
// one, as the entries of an old log were applied; no request of the API can
// prove it is its owner.
func TestSecret_SessionWithoutSecret(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	if res := acquire(m, s, 1, "x", false); !res.Granted {
		t.Fatalf("an old log's acquire: %+v", res)
	}
	if err := m.CheckOwner(s, ownerHash); !errors.Is(err, fence.ErrNotOwner) {
		t.Fatalf("CheckOwner with a secret: %v, want ErrNotOwner", err)
	}
	if err := m.CheckOwner(s, nil); !errors.Is(err, fence.ErrNotOwner) {
		t.Fatalf("CheckOwner without a secret: %v, want ErrNotOwner", err)
	}
	if res := releaseAs(m, s, 2, "x", ownerHash); !errors.Is(res.Err, fence.ErrNotOwner) {
		t.Fatalf("release with a secret: %+v, want ErrNotOwner", res)
	}
	if res := release(m, s, 2, "x"); res.Release != fsm.Released {
		t.Fatalf("an old log's release: %+v", res)
	}
}

// The hash survives a snapshot, and a restored session still refuses
// another secret.
func TestSecret_Snapshot(t *testing.T) {
	m := newMachine(t)
	s := createOwned(t, m, "", ownerHash)
	r := fsm.New(nil)
	if err := r.Restore(mustSnapshot(t, m)); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckOwner(s, ownerHash); err != nil {
		t.Fatalf("restored owner: %v", err)
	}
	if err := r.CheckOwner(s, attackerHash); !errors.Is(err, fence.ErrNotOwner) {
		t.Fatalf("restored, another secret: %v", err)
	}
}

// Revoke ends the holding session as an expiry would: the first waiter is
// granted with a higher token. A free lock, or a token that is not the
// lock's, changes nothing.
func TestRevoke(t *testing.T) {
	m := newMachine(t)
	holder, waiter := createOwned(t, m, "", ownerHash), createOwned(t, m, "", attackerHash)
	g := acquireAs(m, holder, 1, "x", ownerHash)
	acquireAs(m, holder, 2, "other", ownerHash)
	if res := acquireAs(m, waiter, 1, "x", attackerHash); !res.Queued {
		t.Fatalf("waiter: %+v", res)
	}
	revoke := func(name string, tok fence.Token) fsm.Result {
		return m.Apply(&statev1.Command{Op: &statev1.Command_Revoke{Revoke: &statev1.Revoke{Name: name, Token: uint64(tok)}}})
	}
	before := mustSnapshot(t, m)
	for _, res := range []fsm.Result{revoke("free", 0), revoke("x", g.Grant.Token+1)} {
		if !res.Ignored || res.Ended {
			t.Fatalf("revoke of a free lock or another token: %+v", res)
		}
	}
	if !bytes.Equal(mustSnapshot(t, m), before) {
		t.Fatal("an ignored revoke changed the state")
	}
	res := revoke("x", g.Grant.Token)
	if res.Err != nil || !res.Ended || res.Session != holder || res.Grant.Token != g.Grant.Token {
		t.Fatalf("revoke: %+v", res)
	}
	if _, ok := m.Session(holder); ok {
		t.Fatal("the revoked session is still alive")
	}
	if m.Lock("other").Held() {
		t.Fatal("the revoked session still holds its other lock")
	}
	if next := m.Lock("x").Holder; next.Session != waiter || next.Token <= g.Grant.Token {
		t.Fatalf("after the revoke x is held by %+v, want session %d with a token above %d", next, waiter, g.Grant.Token)
	}
}
