package fence_test

import (
	"crypto"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
)

// katSeed is the known-answer test's private key seed: bytes 0 to 31.
func katSeed() []byte {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	return seed
}

// TestSignedGrant_KnownAnswer is the test vector of docs/design.md §10:
// another implementation that encodes and signs the same grant must get
// these bytes (they were checked with Python's struct and OpenSSL).
func TestSignedGrant_KnownAnswer(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(katSeed())
	pub := priv.Public().(ed25519.PublicKey)
	const (
		wantPub   = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
		wantID    = "56475aa75463474c"
		wantInput = "66656e6365642d6772616e742d76310000103536343735616137353436333437346300103566336339613064313265346237613800046c6f636b00096f72646572732f3137000000000000002a0000019ad9c8b27b"
		wantSig   = "be4d8e2708ce831130ee16553ee40bffc12430d6674d7d2b810b0995dae85c0e38e80618d765503f345e4981afe139783e8076d3fd95ef79030c45a319c67f03"
		wantWire  = "fg1.ZmVuY2VkLWdyYW50LXYxAAAQNTY0NzVhYTc1NDYzNDc0YwAQNWYzYzlhMGQxMmU0YjdhOAAEbG9jawAJb3JkZXJzLzE3AAAAAAAAACoAAAGa2ciyew.vk2OJwjOgxEw7hZVPuQL_8EkMNZnTX0rgQsJldroXA446AYY12VQPzReSYGv4Tl4PoB20_2V73kDDEWjGcZ_Aw"
	)
	if got := hex.EncodeToString(pub); got != wantPub {
		t.Fatalf("public key %s, want %s", got, wantPub)
	}
	if got := fence.KeyIDOf(pub); got != wantID {
		t.Fatalf("KeyIDOf=%s, want %s", got, wantID)
	}
	g := fence.SignedGrant{Issuer: "5f3c9a0d12e4b7a8", Kind: "lock", Scope: "orders/17", Token: 42, IssuedAt: time.UnixMilli(1764590400123)}
	s, err := g.Sign(wantID, priv)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.SigningInput()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(in); got != wantInput {
		t.Errorf("SigningInput=%s\nwant          %s", got, wantInput)
	}
	if got := hex.EncodeToString(s.Signature); got != wantSig {
		t.Errorf("signature %s, want %s", got, wantSig)
	}
	if got := s.String(); got != wantWire {
		t.Errorf("String=%s\nwant    %s", got, wantWire)
	}
	ks, err := fence.NewKeySet("5f3c9a0d12e4b7a8", wantID, []fence.PublicKey{{ID: wantID, Key: pub}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ks.VerifyGrant(wantWire)
	if err != nil {
		t.Fatalf("VerifyGrant(test vector): %v", err)
	}
	if v.Scope != "orders/17" || v.Token != 42 || v.Kind != "lock" || !v.IssuedAt.Equal(time.UnixMilli(1764590400123)) {
		t.Fatalf("VerifyGrant=%+v", v)
	}
}

// badSigner is a crypto.Signer that fails, or returns a signature of the
// wrong length.
type badSigner struct{ sig []byte }

func (b badSigner) Public() crypto.PublicKey { return nil }
func (b badSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	if b.sig == nil {
		return nil, errors.New("hsm unplugged")
	}
	return b.sig, nil
}

// SignWith passes a signer's failure on, and refuses a signature that is
// not 64 bytes instead of putting it in a grant.
func TestSignedGrant_SignWithBadSigner(t *testing.T) {
	g := fence.SignedGrant{Issuer: "i", Kind: "lock", Scope: "s", Token: 1, IssuedAt: time.UnixMilli(1)}
	for _, b := range []badSigner{{}, {sig: make([]byte, 63)}} {
		if s, err := g.SignWith("k", b); err == nil {
			t.Fatalf("signer %+v: signed %v, want an error", b, s)
		}
	}
}

// signer is a test issuer with one key.
type signer struct {
	issuer string
	id     string
	priv   ed25519.PrivateKey
	keys   *fence.KeySet
}

func newSigner(t testing.TB, issuer string, seed byte) signer {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	priv := ed25519.NewKeyFromSeed(s)
	pub := priv.Public().(ed25519.PublicKey)
	id := fence.KeyIDOf(pub)
	ks, err := fence.NewKeySet(issuer, id, []fence.PublicKey{{ID: id, Key: pub, CreatedAt: time.UnixMilli(1)}})
	if err != nil {
		t.Fatal(err)
	}
	return signer{issuer, id, priv, ks}
}

func (s signer) sign(t testing.TB, scope string, tok fence.Token) fence.SignedGrant {
	g, err := fence.SignedGrant{Issuer: s.issuer, Kind: "lock", Scope: scope, Token: tok, IssuedAt: time.UnixMilli(1000)}.Sign(s.id, s.priv)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestKeySet_VerifyGrant_Attacks presents what an attacker could make of
// a grant; each must be refused with the error that says why.
func TestKeySet_VerifyGrant_Attacks(t *testing.T) {
	a := newSigner(t, "cluster-a", 1)
	other := newSigner(t, "cluster-b", 2)
	good := a.sign(t, "orders", 7)
	if _, err := a.keys.VerifyGrant(good.String()); err != nil {
		t.Fatalf("the genuine grant: %v", err)
	}
	forged := good
	forged.Signature = append([]byte(nil), good.Signature...)
	forged.Signature[5] ^= 1
	altered := good
	altered.Token = 8 // signature of token 7
	rescoped := good
	rescoped.Scope = "payments"
	sameKeyOtherIssuer, _ := fence.SignedGrant{Issuer: "cluster-b", Kind: "lock", Scope: "orders", Token: 7}.Sign(a.id, a.priv)
	unknownKey, _ := fence.SignedGrant{Issuer: "cluster-a", Kind: "lock", Scope: "orders", Token: 7}.Sign(other.id, other.priv)
	for _, c := range []struct {
		name, wire, want string
		is               error
	}{
		{"forged signature", forged.String(), "does not verify", fence.ErrInvalidGrant},
		{"token altered", altered.String(), "does not verify", fence.ErrInvalidGrant},
		{"scope altered", rescoped.String(), "does not verify", fence.ErrInvalidGrant},
		{"unknown key", unknownKey.String(), "does not publish", fence.ErrInvalidGrant},
		{"another issuer", other.sign(t, "orders", 7).String(), "issued by \"cluster-b\"", fence.ErrIssuerMismatch},
		{"another issuer, this issuer's key", sameKeyOtherIssuer.String(), "issued by \"cluster-b\"", fence.ErrIssuerMismatch},
		{"empty", "", "starts with", fence.ErrInvalidGrant},
		{"a token", "7", "starts with", fence.ErrInvalidGrant},
		{"no signature", strings.Split(good.String(), ".")[0] + "." + strings.Split(good.String(), ".")[1], "want", fence.ErrInvalidGrant},
		{"padded", good.String() + "=", "base64url", fence.ErrInvalidGrant},
		{"short signature", good.String()[:len(good.String())-4], "signature is", fence.ErrInvalidGrant},
	} {
		_, err := a.keys.VerifyGrant(c.wire)
		if !errors.Is(err, c.is) || !errors.Is(err, fence.ErrInvalidGrant) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: VerifyGrant=%v, want %v saying %q", c.name, err, c.is, c.want)
		}
	}
}

// TestSignedGrant_Property: every grant round-trips through its wire
// form and verifies; changing any one byte of the wire form makes it
// fail to parse or to verify, or parse to the same grant (base64url's
// unused low bits are refused by the strict decoder).
func TestSignedGrant_Property(t *testing.T) {
	s := newSigner(t, "cluster-p", 3)
	field := rapid.StringMatching(`[a-z0-9/é]{1,40}`)
	rapid.Check(t, func(rt *rapid.T) {
		g := fence.SignedGrant{
			Issuer:   s.issuer,
			Kind:     fence.Kind(field.Draw(rt, "kind")),
			Scope:    field.Draw(rt, "scope"),
			Token:    fence.Token(rapid.Uint64Range(1, uint64(fence.MaxToken)).Draw(rt, "token")),
			IssuedAt: time.UnixMilli(rapid.Int64().Draw(rt, "issued_at")),
		}
		signed, err := g.Sign(s.id, s.priv)
		if err != nil {
			rt.Fatal(err)
		}
		wire := signed.String()
		v, err := s.keys.VerifyGrant(wire)
		if err != nil {
			rt.Fatalf("VerifyGrant(%s): %v", wire, err)
		}
		if v.Scope != g.Scope || v.Kind != g.Kind || v.Token != g.Token || !v.IssuedAt.Equal(g.IssuedAt) || v.String() != wire {
			rt.Fatalf("round trip changed the grant: %+v -> %+v", g, v)
		}
		changedByteFails(rt, s.keys, wire)
	})
}

// changedByteFails changes one byte of wire, a genuine grant's wire form,
// to another character of the wire alphabet and fails rt if it still
// verifies with keys.
func changedByteFails(rt *rapid.T, keys *fence.KeySet, wire string) {
	i := rapid.IntRange(0, len(wire)-1).Draw(rt, "byte")
	b := []byte(wire)
	b[i] = rapid.SampledFrom([]byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")).Draw(rt, "new")
	if b[i] == wire[i] {
		return
	}
	if got, err := keys.VerifyGrant(string(b)); err == nil {
		rt.Fatalf("a grant changed at byte %d verified: %+v", i, got)
	}
}

// TestLoadKeySet reads the well-known document back and refuses
// malformed ones.
func TestLoadKeySet(t *testing.T) {
	s := newSigner(t, "cluster-j", 4)
	doc, err := s.keys.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := fence.LoadKeySet(doc)
	if err != nil {
		t.Fatalf("LoadKeySet(%s): %v", doc, err)
	}
	if ks.Issuer() != "cluster-j" || ks.Current() != s.id || len(ks.Keys()) != 1 {
		t.Fatalf("LoadKeySet=%+v", ks)
	}
	if _, err := ks.VerifyGrant(s.sign(t, "x", 1).String()); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		``, `{`, `[]`, `{"issuer":""}`, `{"issuer":"a","keys":[{"id":"k","public_key":"AAAA"}]}`,
		`{"issuer":"a","current":"nope","keys":[]}`, `{"issuer":"a","keys":[]} {}`,
		`{"issuer":"a","keys":[{"id":"k","public_key":"A3oHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="},{"id":"k","public_key":"A3oHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="}]}`,
	} {
		if _, err := fence.LoadKeySet([]byte(bad)); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("LoadKeySet(%s)=%v, want fence.ErrInvalidArgument", bad, err)
		}
	}
}

func BenchmarkSignedGrant_Sign(b *testing.B) {
	s := newSigner(b, "cluster-b", 5)
	g := fence.SignedGrant{Issuer: s.issuer, Kind: "lock", Scope: "orders/17", Token: 42}
	for b.Loop() {
		signed, _ := g.Sign(s.id, s.priv)
		_ = signed.String()
	}
}

func BenchmarkKeySet_VerifyGrant(b *testing.B) {
	s := newSigner(b, "cluster-b", 6)
	wire := s.sign(b, "orders/17", 42).String()
	for b.Loop() {
		if _, err := s.keys.VerifyGrant(wire); err != nil {
			b.Fatal(err)
		}
	}
}
