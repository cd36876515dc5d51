package guardtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Issuer is a test cluster that signs grants with one Ed25519 key.
type Issuer struct {
	// ID is the issuer id signed into its grants.
	ID string
	// KeyID is the id of its key.
	KeyID string
	key   ed25519.PrivateKey
}

// NewIssuer returns a test issuer whose key is derived from seed (the
// same seed gives the same key).
func NewIssuer(id string, seed byte) Issuer {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	key := ed25519.NewKeyFromSeed(s)
	return Issuer{ID: id, KeyID: fence.KeyIDOf(key.Public().(ed25519.PublicKey)), key: key}
}

// Keys returns the issuer's published key set.
func (is Issuer) Keys() *fence.KeySet {
	ks, err := fence.NewKeySet(is.ID, is.KeyID, []fence.PublicKey{{ID: is.KeyID, Key: is.key.Public().(ed25519.PublicKey), CreatedAt: time.UnixMilli(0)}})
	if err != nil {
		panic(err) // a valid key always makes a set
	}
	return ks
}

// Sign returns the wire form of a lock grant of token t for scope, signed
// by the issuer.
func (is Issuer) Sign(t testing.TB, scope string, tok fence.Token) string {
	t.Helper()
	return is.SignKind(t, fence.KindLock, scope, tok)
}

// SignKind returns the wire form of a grant of kind k and token t for
// scope, signed by the issuer.
func (is Issuer) SignKind(t testing.TB, k fence.Kind, scope string, tok fence.Token) string {
	t.Helper()
	g, err := fence.SignedGrant{Issuer: is.ID, Kind: k, Scope: scope, Token: tok, IssuedAt: time.UnixMilli(1_764_590_400_000)}.Sign(is.KeyID, is.key)
	if err != nil {
		t.Fatal(err)
	}
	return g.String()
}

// SignBatch returns the wire forms of lock grants of token tok for each
// of scopes, signed together in one batch (fence.SignGrantBatch), as a
// leader under load signs them.
func (is Issuer) SignBatch(t testing.TB, tok fence.Token, scopes ...string) []string {
	t.Helper()
	gs := make([]fence.SignedGrant, len(scopes))
	for i, sc := range scopes {
		gs[i] = fence.SignedGrant{Issuer: is.ID, Kind: fence.KindLock, Scope: sc, Token: tok, IssuedAt: time.UnixMilli(1_764_590_400_000)}
	}
	signed, err := fence.SignGrantBatch(gs, is.KeyID, is.key, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(signed))
	for i, g := range signed {
		out[i] = g.String()
	}
	return out
}

// RunSigned checks g behind guard.Signed against the attacks a signed
// grant exists to stop, on g's real store: a genuine grant is applied
// (and one of a scope covering the object too, and one signed in a
// batch with others); a forged signature, a
// grant of another scope, a read grant of a read/write lock, a token other
// than the one signed (presented
// beside the grant, or altered inside it), a batch neighbour's grant of
// another scope, or its proof under this object's scope, a key the issuer does not
// publish, a grant of another issuer, an issuer header contradicting the
// grant and no grant at all are each refused with fence.ErrInvalidGrant,
// without calling apply or moving the watermark. A genuine grant of a
// stale token is still refused by g's own rule.
func RunSigned(t *testing.T, g Guard) {
	is := NewIssuer("issuer-a", 1)
	other := NewIssuer("issuer-b", 2)
	stranger := NewIssuer("issuer-a", 3) // a's id, a key a does not publish
	sg := guard.Signed(g.Guard, is.Keys())
	do := func(t *testing.T, obj string, tok fence.Token, grant string, issuer string) (applied bool, err error) {
		t.Helper()
		c := ctx(t)
		if grant != "" {
			c = guard.ContextWithGrant(c, grant)
		}
		if issuer != "" {
			c = guard.ContextWithIssuer(c, issuer)
		}
		err = sg.Do(c, obj, tok, func(context.Context) error { applied = true; return nil })
		return applied, err
	}
	mark := g.mark

	obj := object(t)
	if applied, err := do(t, obj, 5, is.Sign(t, obj, 5), ""); err != nil || !applied {
		t.Fatalf("a genuine grant: Do=%v (applied %v), want applied", err, applied)
	}
	if m := mark(t, obj); m != 5 {
		t.Fatalf("watermark %d after the genuine grant, want 5", m)
	}
	// A grant of a scope above the object covers it.
	if !g.FlatNames {
		child := obj + "/part"
		if applied, err := do(t, child, 6, is.Sign(t, obj, 6), is.ID); err != nil || !applied {
			t.Fatalf("a grant of scope %q for %q: Do=%v (applied %v), want applied", obj, child, err, applied)
		}
	}

	genuine := is.Sign(t, obj, 9)
	forged := edit(t, genuine, func(g *fence.SignedGrant) { g.Signature[17] ^= 0x20 })
	altered := edit(t, genuine, func(g *fence.SignedGrant) { g.Token = 10 })
	batch := is.SignBatch(t, 9, obj+"-b", obj+"-c", obj+"-d")
	neighbour := edit(t, batch[0], func(g *fence.SignedGrant) { g.Scope = obj })
	for _, c := range []struct {
		name   string
		tok    fence.Token
		grant  string
		issuer string
		want   string
		also   error
	}{
		{"forged signature", 9, forged, "", "does not verify", nil},
		{"grant of scope b for object a", 9, is.Sign(t, obj+"-b", 9), "", "does not cover", nil},
		{"grant of a sibling scope", 9, is.Sign(t, obj[:len(obj)-1], 9), "", "does not cover", nil},
		{"token other than the signed one", 10, genuine, "", "is for token 9", nil},
		{"token altered inside the grant", 10, altered, "", "does not verify", nil},
		{"batched grant of scope b for object a", 9, batch[0], "", "does not cover", nil},
		{"a batch neighbour's proof under object a's scope", 9, neighbour, "", "does not verify", nil},
		{"unknown key id", 9, stranger.Sign(t, obj, 9), "", "does not publish", nil},
		{"grant from another issuer", 9, other.Sign(t, obj, 9), "", "issued by", fence.ErrIssuerMismatch},
		{"issuer header contradicting the grant", 9, genuine, other.ID, "presents issuer", fence.ErrIssuerMismatch},
		{"read grant of a read/write lock", 9, is.SignKind(t, fence.KindRead, obj, 9), "", "reading only", nil},
		{"no grant", 9, "", "", "none was presented", nil},
		{"not a grant", 9, "9", "", "starts with", nil},
	} {
		applied, err := do(t, obj, c.tok, c.grant, c.issuer)
		if !errors.Is(err, fence.ErrInvalidGrant) || !strings.Contains(err.Error(), c.want) || c.also != nil && !errors.Is(err, c.also) {
			t.Errorf("%s: Do=%v, want fence.ErrInvalidGrant saying %q", c.name, err, c.want)
		}
		if applied {
			t.Errorf("%s: apply ran", c.name)
		}
		if m := mark(t, obj); m != 5 {
			t.Fatalf("%s: watermark %d, want it left at 5", c.name, m)
		}
	}
	// Signature checks do not replace the watermark: a genuine grant of a
	// stale token is refused by the inner guard.
	var se *fence.StaleTokenError
	if applied, err := do(t, obj, 4, is.Sign(t, obj, 4), ""); !errors.As(err, &se) || se.Required != 5 || applied {
		t.Fatalf("a genuine grant of stale token 4: Do=%v (applied %v), want a StaleTokenError requiring 5", err, applied)
	}
	if applied, err := do(t, obj, 9, genuine, is.ID); err != nil || !applied {
		t.Fatalf("the genuine grant of token 9 after the attacks: Do=%v", err)
	}
	if m := mark(t, obj); m != 9 {
		t.Fatalf("watermark %d, want 9", m)
	}
	if applied, err := do(t, obj, 11, is.SignBatch(t, 11, obj+"-x", obj, obj+"-y")[1], is.ID); err != nil || !applied {
		t.Fatalf("a genuine grant of token 11 signed in a batch: Do=%v (applied %v), want applied", err, applied)
	}
	if m := mark(t, obj); m != 11 {
		t.Fatalf("watermark %d after the batched grant, want 11", m)
	}
}

// edit returns the wire form of grant changed by change, its signature
// kept unless change alters it: what an attacker who edits a grant gets.
func edit(t *testing.T, grant string, change func(g *fence.SignedGrant)) string {
	t.Helper()
	g, err := fence.ParseSignedGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	change(&g)
	return g.String()
}
