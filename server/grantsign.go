package server

import (
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"filippo.io/edwards25519"
)

// grantSigner signs grants with one Ed25519 key, expanded once: its secret
// scalar, nonce prefix and public key. Signing with it gives exactly the
// signature crypto/ed25519.Sign gives for the same key and message (RFC
// 8032 Ed25519 is deterministic; TestGrantSigner_SameAsStandardLibrary
// holds it to that), at less cost: crypto/ed25519 encodes the nonce point
// R twice per signature (once to hash it, once to write it), and each
// encoding is a field inversion, about a third of a signature in the
// profile of a lock cycle; this encodes it once.
type grantSigner struct {
	priv   ed25519.PrivateKey // the key it was expanded from
	s      *edwards25519.Scalar
	prefix [32]byte
	pub    [32]byte
}

func newGrantSigner(priv ed25519.PrivateKey) (*grantSigner, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("the signing key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	h := sha512.Sum512(priv[:ed25519.SeedSize])
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		return nil, err
	}
	g := &grantSigner{priv: priv, s: s}
	copy(g.prefix[:], h[32:])
	copy(g.pub[:], priv[ed25519.SeedSize:])
	return g, nil
}

var _ crypto.Signer = (*grantSigner)(nil)

// Public implements crypto.Signer.
func (g *grantSigner) Public() crypto.PublicKey { return g.priv.Public() }

// Sign implements crypto.Signer for pure Ed25519 (opts crypto.Hash(0),
// as fence.SignedGrant.SignWith asks): the signature of msg itself.
func (g *grantSigner) Sign(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts.HashFunc() != crypto.Hash(0) {
		return nil, errors.New("the grant signer signs pure Ed25519 only (crypto.Hash(0))")
	}
	return g.sign(msg), nil
}

// sign returns the Ed25519 signature of msg (RFC 8032 §5.1.6).
func (g *grantSigner) sign(msg []byte) []byte {
	var digest [sha512.Size]byte
	h := sha512.New()
	h.Write(g.prefix[:])
	h.Write(msg)
	r, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic("ed25519: internal error: setting scalar failed")
	}
	sig := make([]byte, ed25519.SignatureSize)
	copy(sig[:32], new(edwards25519.Point).ScalarBaseMult(r).Bytes())
	h.Reset()
	h.Write(sig[:32])
	h.Write(g.pub[:])
	h.Write(msg)
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		panic("ed25519: internal error: setting scalar failed")
	}
	copy(sig[32:], edwards25519.NewScalar().MultiplyAdd(k, g.s, r).Bytes())
	return sig
}

// grantSigners keeps the signer of the current signing key.
type grantSigners struct {
	cur atomic.Pointer[grantSigner]
}

// of returns the signer of priv, expanding it when it is not the current
// one (after a rotation, once).
func (c *grantSigners) of(priv ed25519.PrivateKey) (*grantSigner, error) {
	if g := c.cur.Load(); g != nil && subtle.ConstantTimeCompare(g.priv, priv) == 1 {
		return g, nil
	}
	g, err := newGrantSigner(priv)
	if err != nil {
		return nil, err
	}
	c.cur.Store(g)
	return g, nil
}
