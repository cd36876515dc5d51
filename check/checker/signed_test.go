package checker_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// The signed-grant checker passes acquires handed their own signed grant
// (alone or from a batch) and those without one, and reports a grant of
// another token or scope, one that does not verify with the published
// keys, and one that does not parse; without the keys it still reports
// the grant that is not the acquire's own.
func TestSignedGrants(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	id := fence.KeyIDOf(pub)
	ks, err := fence.NewKeySet("cluster", id, []fence.PublicKey{{ID: id, Key: pub, CreatedAt: time.UnixMilli(1)}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ks.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	grant := func(kind fence.Kind, scope string, tok fence.Token) fence.SignedGrant {
		return fence.SignedGrant{Issuer: "cluster", Kind: kind, Scope: scope, Token: tok, IssuedAt: time.UnixMilli(5)}
	}
	batch, err := fence.SignGrantBatch([]fence.SignedGrant{grant(fence.KindLock, "a", 1), grant(fence.KindLock, "b", 2), grant(fence.KindPermit, "s/0", 3)}, id, priv, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := grant(fence.KindRead, "rw", 4).Sign(id, priv)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	forged, err := grant(fence.KindLock, "c", 5).Sign(id, otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	acq := func(name, kind, scope string, tok uint64, signed string) history.Op {
		return history.Op{Process: "p1", Kind: history.OpAcquire, Outcome: history.OK, Name: name, GrantKind: kind, Scope: scope, Token: tok, Signed: signed}
	}
	keysOp := history.Op{Process: history.FinalProcess, Kind: history.OpSigningKeys, Outcome: history.OK, Value: string(doc)}
	good := history.History{
		acq("a", "", "", 1, batch[0].String()),
		acq("b", history.GrantLock, "b", 2, batch[1].String()),
		acq("s", history.GrantPermit, "s/0", 3, batch[2].String()),
		acq("rw", history.GrantRead, "rw", 4, alone.String()),
		acq("unsigned", "", "", 9, ""),
	}
	if v := checker.SignedGrants(append(good, keysOp)); len(v) != 0 {
		t.Fatalf("genuine grants: %v", v)
	}
	bad := history.History{
		acq("a", "", "", 1, batch[1].String()),                     // b's grant handed to a's acquire
		acq("s", history.GrantPermit, "s/1", 3, batch[2].String()), // another slot
		acq("c", "", "", 5, forged.String()),
		acq("d", "", "", 6, "fg1.nonsense"),
	}
	want := []string{"not of its own lock \"a\" token 1", "not of its own permit \"s/1\"", "refuses", "refuses"}
	v := checker.SignedGrants(append(bad, keysOp))
	if len(v) != len(want) {
		t.Fatalf("%d violations, want %d: %v", len(v), len(want), v)
	}
	for i, w := range want {
		if v[i].Check != checker.SignedGrantCheck || !strings.Contains(v[i].Message, w) {
			t.Errorf("violation %d: %s %q, want %q", i, v[i].Check, v[i].Message, w)
		}
	}
	// Without the published keys: the forged grant parses and is the
	// acquire's own, so only the others are reported.
	if v := checker.SignedGrants(bad); len(v) != 3 {
		t.Fatalf("without the keys: %d violations, want 3: %v", len(v), v)
	}
	if got := checker.All(append(bad, keysOp), checker.Options{}); !hasCheck(got, checker.SignedGrantCheck) {
		t.Fatalf("checker.All does not run the signed-grant checker: %v", got)
	}
}
