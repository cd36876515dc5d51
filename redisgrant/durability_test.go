package redisgrant_test

import (
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

// grantMany acquires and releases name n times and returns the last grant.
func grantMany(t *testing.T, g *redisgrant.Grantor, name string, n int) fence.Grant {
	t.Helper()
	var last fence.Grant
	for i := 0; i < n; i++ {
		l := mustAcquire(t, g, name, time.Minute)
		if l.Token() <= last.Token {
			t.Fatalf("Token()=%d after %d", l.Token(), last.Token)
		}
		last = l.Grant()
		if _, err := l.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

// With appendfsync always, every script's writes are in the AOF, fsynced,
// before Redis replies: a kill -9 and restart keeps the counter, so tokens
// keep rising, even for a lock held at the kill.
func TestLease_CounterSurvivesKill9WithAppendfsyncAlways(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	g := redisgrant.New(clientOf(t, r.Addr))
	name := uniqueName(t)
	before := grantMany(t, g, name, 20)
	held := mustAcquire(t, g, name, time.Minute)

	r.Kill() // SIGKILL: no shutdown, no final save
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	g = redisgrant.New(clientOf(t, r.Addr))
	// The lease held at the kill came back with the AOF: its TTL still
	// runs (Redis stores the absolute expiry time).
	if ok, h, err := g.Verify(ctx(t), name, held.Token()); err != nil || !ok {
		t.Fatalf("Verify(held)=%v, %+v, %v after restart; want the lease in force", ok, h, err)
	}
	// Its owner token came back too: its holder (whose client reconnects)
	// can release it.
	if res, err := held.Release(ctx(t)); err != nil || res != fence.Released {
		t.Fatalf("Release of the lease held at the kill=%v, %v; want released", res, err)
	}
	after := grantMany(t, g, name, 1)
	if after.Token <= held.Token() || after.Issuer != before.Issuer {
		t.Fatalf("after kill -9 and restart: token %d (issuer %s), want above %d with issuer %s", after.Token, after.Issuer, held.Token(), before.Issuer)
	}
}

// The negative control, and what docs/library-mode-redis.md warns about:
// without persistence a restart loses the counter and tokens start again
// at 1. The counter's issuer is lost with it, so the new tokens carry
// another issuer: a guard pinned to the old one refuses them.
func TestLease_CounterLostWithoutPersistence(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	g := redisgrant.New(clientOf(t, r.Addr))
	name := uniqueName(t)
	before := grantMany(t, g, name, 5)
	r.Kill()
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	after := grantMany(t, redisgrant.New(clientOf(t, r.Addr)), name, 1)
	if after.Token != 1 || after.Issuer == before.Issuer {
		t.Fatalf("after a restart without persistence: token %d issuer %s; want 1 with an issuer other than %s", after.Token, after.Issuer, before.Issuer)
	}
}

// Restoring an older snapshot rolls the counter back with the same
// issuer: tokens repeat, and nothing in Redis can tell. This is the case
// docs/library-mode-redis.md says Redis cannot protect against.
func TestLease_RestoreOfOlderSnapshotRollsBack(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	g := redisgrant.New(rdb)
	name := uniqueName(t)
	snap := grantMany(t, g, name, 3)
	if err := rdb.Save(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	later := grantMany(t, g, name, 3)
	r.Kill() // the snapshot on disk is older than the counter
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	again := grantMany(t, redisgrant.New(clientOf(t, r.Addr)), name, 1)
	if again.Token != snap.Token+1 || again.Issuer != later.Issuer || again.Token > later.Token {
		t.Fatalf("after restoring the snapshot: token %d issuer %s; the documented rollback is token %d, issuer %s (at or below %d)", again.Token, again.Issuer, snap.Token+1, later.Issuer, later.Token)
	}
}
