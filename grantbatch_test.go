package fence_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
)

// batchOf returns n grants of s's issuer, token base+i, scope "orders/i".
func batchOf(s signer, n int, base fence.Token) []fence.SignedGrant {
	gs := make([]fence.SignedGrant, n)
	for i := range gs {
		gs[i] = fence.SignedGrant{Issuer: s.issuer, Kind: "lock", Scope: fmt.Sprintf("orders/%d", i), Token: base + fence.Token(i), IssuedAt: time.UnixMilli(1000 + int64(i))}
	}
	return gs
}

func signBatch(t testing.TB, s signer, gs []fence.SignedGrant) []fence.SignedGrant {
	t.Helper()
	out, err := fence.SignGrantBatch(gs, s.id, s.priv, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every grant of every batch size, up to MaxGrantBatch, verifies on its
// own through its wire form and parses back to itself; they share one
// signature; one grant alone is signed as Sign signs it.
func TestSignGrantBatch_EverySizeVerifies(t *testing.T) {
	s := newSigner(t, "cluster-b", 4)
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 64, 100, fence.MaxGrantBatch} {
		signed := signBatch(t, s, batchOf(s, n, 10))
		for i, g := range signed {
			wire := g.String()
			want := "fg2."
			if n == 1 {
				want = "fg1."
			}
			if !strings.HasPrefix(wire, want) {
				t.Fatalf("batch of %d, grant %d: wire form %.8s..., want %s", n, i, wire, want)
			}
			v, err := s.keys.VerifyGrant(wire)
			if err != nil {
				t.Fatalf("batch of %d, grant %d: %v", n, i, err)
			}
			if v.Token != fence.Token(10+i) || v.Scope != fmt.Sprintf("orders/%d", i) || v.String() != wire {
				t.Fatalf("batch of %d, grant %d: round trip gave %+v", n, i, v)
			}
			if !bytes.Equal(g.Signature, signed[0].Signature) {
				t.Fatalf("batch of %d: grant %d has a signature of its own", n, i)
			}
		}
	}
	alone := batchOf(s, 1, 10)[0]
	single, err := alone.Sign(s.id, s.priv)
	if err != nil {
		t.Fatal(err)
	}
	if got := signBatch(t, s, []fence.SignedGrant{alone})[0]; got.String() != single.String() {
		t.Fatalf("a batch of one: %s, want Sign's %s", got, single)
	}
	for _, n := range []int{0, fence.MaxGrantBatch + 1} {
		if _, err := fence.SignGrantBatch(batchOf(s, n, 10), s.id, s.priv, rand.Reader); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("a batch of %d: %v, want ErrInvalidArgument", n, err)
		}
	}
}

// wireParts splits a batched grant's wire form into its grant, proof and
// signature bytes.
func wireParts(t *testing.T, wire string) (grant, proof, sig []byte) {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(wire, "fg2."), ".")
	if len(parts) != 3 {
		t.Fatalf("%s: %d parts", wire, len(parts))
	}
	var out [3][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out[0], out[1], out[2]
}

func batchWire(grant, proof, sig []byte) string {
	enc := base64.RawURLEncoding
	return "fg2." + enc.EncodeToString(grant) + "." + enc.EncodeToString(proof) + "." + enc.EncodeToString(sig)
}

// TestSignGrantBatch_Attacks presents what a holder of one grant of a
// batch could make of it: another grant's tuple with its proof, its proof
// moved to another place in the batch, a path cut short or lengthened,
// a salt changed, the batch's signature as a grant signed alone, a batch
// of one; each is refused.
func TestSignGrantBatch_Attacks(t *testing.T) {
	s := newSigner(t, "cluster-b", 5)
	signed := signBatch(t, s, batchOf(s, 5, 100))
	mine, theirs := signed[1], signed[2]
	grant, proof, sig := wireParts(t, mine.String())
	theirGrant, _, _ := wireParts(t, theirs.String())
	if _, err := s.keys.VerifyGrant(batchWire(grant, proof, sig)); err != nil {
		t.Fatalf("the genuine grant: %v", err)
	}
	withIndex := func(index, size uint16) []byte {
		p := bytes.Clone(proof)
		binary.BigEndian.PutUint16(p[16:], index)
		binary.BigEndian.PutUint16(p[18:], size)
		return p
	}
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 1
		return b
	}
	rescoped := mine
	rescoped.Scope = "payments"
	retokened := mine
	retokened.Token = 103
	alone := mine
	alone.Batch = nil
	for _, c := range []struct{ name, wire, want string }{
		{"another grant's tuple with my proof", batchWire(theirGrant, proof, sig), "does not verify"},
		{"my tuple, scope changed", rescoped.String(), "does not verify"},
		{"my tuple, token changed", retokened.String(), "does not verify"},
		{"moved to index 2", batchWire(grant, withIndex(2, 5), sig), "does not verify"},
		{"moved to index 0", batchWire(grant, withIndex(0, 5), sig), "does not verify"},
		{"a batch of 6", batchWire(grant, withIndex(1, 6), sig), "does not verify"},
		{"a batch of 2", batchWire(grant, withIndex(1, 2), sig), "longer than"},
		{"a batch of 9", batchWire(grant, withIndex(1, 9), sig), "shorter than"},
		{"a batch of 1", batchWire(grant, withIndex(0, 1), sig), "batch of 2 to"},
		{"index outside", batchWire(grant, withIndex(5, 5), sig), "batch of 2 to"},
		{"path cut short", batchWire(grant, proof[:len(proof)-32], sig), "shorter than"},
		{"path lengthened", batchWire(grant, append(bytes.Clone(proof), make([]byte, 32)...), sig), "longer than"},
		{"path torn", batchWire(grant, proof[:len(proof)-1], sig), "multiple of"},
		{"salt changed", batchWire(grant, flip(proof, 0), sig), "does not verify"},
		{"path hash changed", batchWire(grant, flip(proof, len(proof)-1), sig), "does not verify"},
		{"signature changed", batchWire(grant, proof, flip(sig, 3)), "does not verify"},
		{"the batch's signature on the grant alone", alone.String(), "does not verify"},
		{"no proof", "fg2." + strings.SplitN(mine.String(), ".", 3)[1] + "." + base64.RawURLEncoding.EncodeToString(sig), "want"},
	} {
		_, err := s.keys.VerifyGrant(c.wire)
		if !errors.Is(err, fence.ErrInvalidGrant) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: VerifyGrant=%v, want ErrInvalidGrant saying %q", c.name, err, c.want)
		}
	}
}

// TestSignGrantBatch_Property: changing any one byte of a batched grant's
// wire form makes it fail to parse or to verify (or parse to the same
// grant, where base64url's unused low bits are involved: refused).
func TestSignGrantBatch_Property(t *testing.T) {
	s := newSigner(t, "cluster-q", 6)
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 40).Draw(rt, "size")
		signed, err := fence.SignGrantBatch(batchOf(s, n, 1), s.id, s.priv, rand.Reader)
		if err != nil {
			rt.Fatal(err)
		}
		wire := signed[rapid.IntRange(0, n-1).Draw(rt, "index")].String()
		if _, err := s.keys.VerifyGrant(wire); err != nil {
			rt.Fatalf("VerifyGrant(%s): %v", wire, err)
		}
		changedByteFails(rt, s.keys, wire)
	})
}

// TestSignGrantBatch_KnownAnswer is the batch test vector of
// docs/design.md §10: the known-answer key, three grants (scopes
// orders/17 to orders/19, tokens 42 to 44, issued_at 1764590400123 to
// ...125 ms) and the salts 0xa0, 0xa1, ... 0xcf, 16 a grant. The leaves,
// root, paths and signature were checked with Python's hashlib and
// struct and OpenSSL 3 (`pkeyutl -verify -rawin`).
func TestSignGrantBatch_KnownAnswer(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(katSeed())
	pub := priv.Public().(ed25519.PublicKey)
	const id = "56475aa75463474c"
	salts := make([]byte, 48)
	for i := range salts {
		salts[i] = byte(0xa0 + i)
	}
	var gs []fence.SignedGrant
	for i := range 3 {
		gs = append(gs, fence.SignedGrant{Issuer: "5f3c9a0d12e4b7a8", Kind: "lock", Scope: fmt.Sprintf("orders/%d", 17+i), Token: fence.Token(42 + i), IssuedAt: time.UnixMilli(1764590400123 + int64(i))})
	}
	signed, err := fence.SignGrantBatch(gs, id, priv, bytes.NewReader(salts))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fg2.ZmVuY2VkLWdyYW50LXYxAAAQNTY0NzVhYTc1NDYzNDc0YwAQNWYzYzlhMGQxMmU0YjdhOAAEbG9jawAJb3JkZXJzLzE3AAAAAAAAACoAAAGa2ciyew.oKGio6SlpqeoqaqrrK2urwAAAAP1tFubYFBp-dMh75Utk4JddpRH3m1Z0gv5VzEsTQv3pSsNpP5AscvstFSNGNmyOa7ksIONX0G3IHxcTss9CoYs.1tqrc27RVXRPrLEPz_ochRoPvzgnLrMxLpeanngjaJmonSwpRu0nWY5y8uSm3hBrUJ1FKf_rvDipne-pnCXFBQ",
		"fg2.ZmVuY2VkLWdyYW50LXYxAAAQNTY0NzVhYTc1NDYzNDc0YwAQNWYzYzlhMGQxMmU0YjdhOAAEbG9jawAJb3JkZXJzLzE4AAAAAAAAACsAAAGa2ciyfA.sLGys7S1tre4ubq7vL2-vwABAANguoY0nKyfRChOnSCdq4t7rCyiHMGvs8Jtr8U97QssBisNpP5AscvstFSNGNmyOa7ksIONX0G3IHxcTss9CoYs.1tqrc27RVXRPrLEPz_ochRoPvzgnLrMxLpeanngjaJmonSwpRu0nWY5y8uSm3hBrUJ1FKf_rvDipne-pnCXFBQ",
		"fg2.ZmVuY2VkLWdyYW50LXYxAAAQNTY0NzVhYTc1NDYzNDc0YwAQNWYzYzlhMGQxMmU0YjdhOAAEbG9jawAJb3JkZXJzLzE5AAAAAAAAACwAAAGa2ciyfQ.wMHCw8TFxsfIycrLzM3OzwACAAMQWhk4b41lIMRKF_ekllj3QZipgUW6gwXsLBUzFn41xA.1tqrc27RVXRPrLEPz_ochRoPvzgnLrMxLpeanngjaJmonSwpRu0nWY5y8uSm3hBrUJ1FKf_rvDipne-pnCXFBQ",
	}
	const wantSig = "d6daab736ed155744facb10fcffa1c851a0fbf38272eb3312e979a9e78236899a89d2c2946ed27598e72f2e4a6de106b509d4529ffebbc38a99defa99c25c505"
	if got := hex.EncodeToString(signed[0].Signature); got != wantSig {
		t.Errorf("signature %s, want %s", got, wantSig)
	}
	ks, err := fence.NewKeySet("5f3c9a0d12e4b7a8", id, []fence.PublicKey{{ID: id, Key: pub}})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range signed {
		if got := g.String(); got != want[i] {
			t.Errorf("grant %d: String=%s\nwant            %s", i, got, want[i])
		}
		if _, err := ks.VerifyGrant(want[i]); err != nil {
			t.Errorf("VerifyGrant(test vector %d): %v", i, err)
		}
	}
}

// FuzzParseSignedGrant: whatever it is given, ParseSignedGrant does not
// panic, refuses with ErrInvalidGrant or returns a grant whose wire form
// is exactly the input (one encoding per grant, batched or not), and
// only the genuine grants verify.
func FuzzParseSignedGrant(f *testing.F) {
	s := newSigner(f, "cluster-f", 7)
	genuine := map[string]bool{}
	for _, n := range []int{1, 2, 3, 5} {
		// Fixed salts: every fuzzing worker builds the same grants.
		signed, err := fence.SignGrantBatch(batchOf(s, n, 1), s.id, s.priv, bytes.NewReader(make([]byte, 16*n)))
		if err != nil {
			f.Fatal(err)
		}
		for _, g := range signed {
			genuine[g.String()] = true
			f.Add(g.String())
		}
	}
	f.Add("fg2.")
	f.Add("fg2...")
	f.Fuzz(func(t *testing.T, in string) {
		g, err := fence.ParseSignedGrant(in)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidGrant) {
				t.Fatalf("ParseSignedGrant(%q): %v, not ErrInvalidGrant", in, err)
			}
			return
		}
		if out := g.String(); out != in {
			t.Fatalf("ParseSignedGrant(%q) prints back as %q", in, out)
		}
		if _, err := s.keys.VerifyGrant(in); (err == nil) != genuine[in] {
			t.Fatalf("VerifyGrant(%q) = %v; genuine %v", in, err, genuine[in])
		}
	})
}

// BenchmarkSignGrantBatch measures what a leader does for the grants of
// one Raft entry (16 here): one batch signature, then each grant's wire
// form.
func BenchmarkSignGrantBatch(b *testing.B) {
	s := newSigner(b, "cluster-b", 5)
	gs := make([]fence.SignedGrant, 16)
	for i := range gs {
		gs[i] = fence.SignedGrant{Issuer: s.issuer, Kind: "lock", Scope: fmt.Sprintf("bench/lock/%d", i), Token: fence.Token(42 + i)}
	}
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := fence.SignGrantBatch(gs, s.id, s.priv, rand.Reader); err != nil {
				b.Fatal(err)
			}
		}
	})
	signed, err := fence.SignGrantBatch(gs, s.id, s.priv, rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("wire", func(b *testing.B) {
		for b.Loop() {
			for _, g := range signed {
				_ = g.String()
			}
		}
	})
}
