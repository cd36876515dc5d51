package server

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// The grant signer gives, for every key and message tried, exactly the
// signature crypto/ed25519 gives (Ed25519 is deterministic), and it
// verifies; a flipped bit of the message makes it another signature.
func TestGrantSigner_SameAsStandardLibrary(t *testing.T) {
	for i := 0; i < 200; i++ {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		g, err := newGrantSigner(priv)
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, i*7%300)
		rand.Read(msg)
		got := g.sign(msg)
		if want := ed25519.Sign(priv, msg); !bytes.Equal(got, want) {
			t.Fatalf("key %d, %d-byte message: signature %x, crypto/ed25519 gives %x", i, len(msg), got, want)
		}
		if !ed25519.Verify(priv.Public().(ed25519.PublicKey), msg, got) {
			t.Fatalf("key %d: the signature does not verify", i)
		}
		if len(msg) > 0 {
			msg[0] ^= 1
			if bytes.Equal(g.sign(msg), got) {
				t.Fatalf("key %d: two messages, one signature", i)
			}
		}
	}
	if _, err := newGrantSigner(make([]byte, 32)); err == nil {
		t.Fatal("a 32-byte private key was taken")
	}
}

// The signer refuses what is not pure Ed25519, and after a rotation the
// cache signs with the new key, not the old one.
func TestGrantSigners_FollowRotation(t *testing.T) {
	seed := func(b byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, 32)) }
	var c grantSigners
	msg := []byte("fenced")
	for _, priv := range []ed25519.PrivateKey{seed(1), seed(1), seed(2), seed(1)} {
		g, err := c.of(priv)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(g.sign(msg), ed25519.Sign(priv, msg)) {
			t.Fatal("the cached signer signed with another key than the current one")
		}
	}
	g, _ := c.of(seed(3))
	if _, err := g.Sign(nil, msg, crypto.SHA256); err == nil {
		t.Fatal("a SHA-256 prehashed signature was made")
	}
	digest := sha256.Sum256(msg)
	if _, err := g.Sign(nil, digest[:], crypto.SHA512); err == nil {
		t.Fatal("an Ed25519ph signature was made")
	}
}

// Signing a grant (the work handOut adds to every granted acquire) stays
// within its allocation budget: the signing input, the signature, the
// hash state and the wire form.
func TestGrantSigner_SignAllocs(t *testing.T) {
	var c grantSigners
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	grant := fence.SignedGrant{Issuer: "cluster-1", Kind: fence.KindLock, Scope: "bench/lock-1", Token: 12345, IssuedAt: time.UnixMilli(1_700_000_000_000)}
	allocs := testing.AllocsPerRun(100, func() {
		g, err := c.of(priv)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := grant.SignWith("k1", g)
		if err != nil || signed.String() == "" {
			t.Fatal(err)
		}
	})
	const budget = 6
	t.Logf("%.0f allocations per signed grant", allocs)
	if allocs > budget {
		t.Fatalf("signing a grant took %.0f allocations, budget %d", allocs, budget)
	}
}

// The server's signer reproduces the known-answer vector of docs/design.md
// §10 (fence's TestSignedGrant_KnownAnswer) byte for byte.
func TestGrantSigner_KnownAnswer(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	const wantWire = "fg1.ZmVuY2VkLWdyYW50LXYxAAAQNTY0NzVhYTc1NDYzNDc0YwAQNWYzYzlhMGQxMmU0YjdhOAAEbG9jawAJb3JkZXJzLzE3AAAAAAAAACoAAAGa2ciyew.vk2OJwjOgxEw7hZVPuQL_8EkMNZnTX0rgQsJldroXA446AYY12VQPzReSYGv4Tl4PoB20_2V73kDDEWjGcZ_Aw"
	g, err := newGrantSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	s, err := fence.SignedGrant{Issuer: "5f3c9a0d12e4b7a8", Kind: "lock", Scope: "orders/17", Token: 42, IssuedAt: time.UnixMilli(1764590400123)}.SignWith("56475aa75463474c", g)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != wantWire {
		t.Fatalf("String=%s\nwant    %s", got, wantWire)
	}
}
