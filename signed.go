package fence

import (
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalidGrant reports a signed grant a resource refuses: missing,
// malformed, signed by a key the verifier does not know, with a signature
// that does not verify, for another token than the one presented, or for a
// scope that does not cover the object written. Nothing was applied. The
// message says which.
var ErrInvalidGrant = errors.New("fence: invalid signed grant")

// SignedGrant is what the cluster signs for a holder: its issuer, the kind
// and scope the token is authority for, the token and the time the grant
// was issued, with the id of the signing key and the Ed25519 signature
// over their canonical encoding (SigningInput). Its wire form (String,
// ParseSignedGrant) is the value of the X-Fencing-Grant header, the
// x-fencing-grant gRPC metadata and fence.Grant's Signed field.
//
// A signed grant proves that the issuer granted Token for Scope; it is not
// a secret and not a capability on its own: the resource's watermark check
// still decides whether Token is current (docs/design.md §10).
type SignedGrant struct {
	// KeyID names the cluster key that signed the grant (KeySet).
	KeyID string
	// Issuer is the cluster that issued Token.
	Issuer string
	// Kind is what the grant is (KindLock for the exclusive lock).
	Kind Kind
	// Scope is what Token is authority for; ScopeCovers says which objects.
	Scope string
	// Token is the grant's fencing token.
	Token Token
	// IssuedAt is the leader's wall clock when the grant was made, to the
	// millisecond; for display only, never for safety decisions.
	IssuedAt time.Time
	// Signature is the Ed25519 signature of SigningInput, or with Batch
	// of the root of the batch the grant was signed in; empty until
	// signed.
	Signature []byte
	// Batch places the grant in the batch its Signature is over when it
	// was signed together with others (SignGrantBatch); nil when the
	// signature is over the grant alone.
	Batch *GrantBatchProof
}

// Limits of the fields of a SignedGrant: every string is 1 to
// MaxGrantFieldLen bytes of UTF-8.
const MaxGrantFieldLen = 1024

// signedGrantMagic opens every signing input: the format and its version.
// It keeps the signature from meaning anything in another protocol that
// uses the same key.
const signedGrantMagic = "fenced-grant-v1\x00"

// signedGrantPrefix opens the wire form.
const signedGrantPrefix = "fg1."

// SigningInput returns the canonical encoding of g that its Signature is
// over (docs/design.md §10): the 16 bytes "fenced-grant-v1" and a zero
// byte, then KeyID, Issuer, Kind and Scope, each as a 2-byte big-endian
// length and its UTF-8 bytes, then Token as 8 bytes and IssuedAt in Unix
// milliseconds as 8 bytes, both big-endian (IssuedAt as a two's-complement
// int64). Every tuple has exactly one encoding and every encoding one
// tuple. It fails when a string field is empty, longer than
// MaxGrantFieldLen or not UTF-8, or Token is invalid.
func (g SignedGrant) SigningInput() ([]byte, error) {
	return g.appendSigningInput(nil)
}

// appendSigningInput appends SigningInput's encoding of g to dst.
func (g SignedGrant) appendSigningInput(dst []byte) ([]byte, error) {
	for _, f := range [...]struct{ name, v string }{{"key id", g.KeyID}, {"issuer", g.Issuer}, {"kind", string(g.Kind)}, {"scope", g.Scope}} {
		switch {
		case f.v == "":
			return nil, fmt.Errorf("%w: the %s is empty", ErrInvalidGrant, f.name)
		case len(f.v) > MaxGrantFieldLen:
			return nil, fmt.Errorf("%w: the %s is %d bytes, longer than %d", ErrInvalidGrant, f.name, len(f.v), MaxGrantFieldLen)
		case !utf8.ValidString(f.v):
			return nil, fmt.Errorf("%w: the %s is not UTF-8", ErrInvalidGrant, f.name)
		}
	}
	if !g.Token.Valid() {
		return nil, fmt.Errorf("%w: token %d is outside 1..%d", ErrInvalidGrant, uint64(g.Token), uint64(MaxToken))
	}
	b := slices.Grow(dst, len(signedGrantMagic)+8+len(g.KeyID)+len(g.Issuer)+len(g.Kind)+len(g.Scope)+16)
	b = append(b, signedGrantMagic...)
	for _, s := range [...]string{g.KeyID, g.Issuer, string(g.Kind), g.Scope} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(g.Token))
	b = binary.BigEndian.AppendUint64(b, uint64(g.IssuedAt.UnixMilli()))
	return b, nil
}

// Sign returns g signed with key under keyID: g with KeyID, Signature and
// IssuedAt (truncated to the millisecond) set. The cluster's leader signs
// every grant it hands a holder; tests and other issuers use it too.
func (g SignedGrant) Sign(keyID string, key ed25519.PrivateKey) (SignedGrant, error) {
	if len(key) != ed25519.PrivateKeySize {
		return SignedGrant{}, fmt.Errorf("%w: the signing key is %d bytes, want %d", ErrInvalidArgument, len(key), ed25519.PrivateKeySize)
	}
	return g.SignWith(keyID, key)
}

// SignWith is Sign with any crypto.Signer of an Ed25519 key (an
// ed25519.PrivateKey, a key kept in an HSM, or the cluster's expanded
// key): it asks signer for a pure Ed25519 signature (crypto.Hash(0)) of
// the SigningInput, which must be ed25519.SignatureSize bytes.
func (g SignedGrant) SignWith(keyID string, signer crypto.Signer) (SignedGrant, error) {
	g.KeyID = keyID
	g.IssuedAt = time.UnixMilli(g.IssuedAt.UnixMilli()).UTC()
	msg, err := g.SigningInput()
	if err != nil {
		return SignedGrant{}, err
	}
	sig, err := signer.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		return SignedGrant{}, fmt.Errorf("sign grant: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return SignedGrant{}, fmt.Errorf("sign grant: the signature is %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	g.Signature = sig
	return g, nil
}

// String returns the wire form of a signed g: "fg1.", its SigningInput in
// unpadded base64url, ".", and its signature in unpadded base64url; a
// batched grant's is "fg2.", its SigningInput, ".", its batch proof, ".",
// and the signature, each in unpadded base64url. It returns "" when g
// cannot be encoded or is not signed.
func (g SignedGrant) String() string {
	// The parts are built in buffers on the stack (a leader encodes every
	// grant it hands out): one allocation, the string.
	var in, proof [512]byte
	var out [1536]byte
	msg, err := g.appendSigningInput(in[:0])
	if err != nil || len(g.Signature) != ed25519.SignatureSize {
		return ""
	}
	enc := base64.RawURLEncoding
	b := out[:0]
	if g.Batch == nil {
		b = append(b, signedGrantPrefix...)
	} else {
		b = append(b, signedGrantBatchPrefix...)
	}
	b = enc.AppendEncode(b, msg)
	if g.Batch != nil {
		b = append(b, '.')
		b = enc.AppendEncode(b, g.Batch.appendTo(proof[:0]))
	}
	b = append(b, '.')
	b = enc.AppendEncode(b, g.Signature)
	return string(b)
}

// ParseSignedGrant decodes the wire form of a signed grant (String)
// without verifying its signature: use a KeySet's Verify to trust it. A
// malformed value is an error matching ErrInvalidGrant that says what is
// wrong.
func ParseSignedGrant(s string) (SignedGrant, error) {
	// The base64 decoder skips line breaks; a grant has one encoding.
	if strings.ContainsAny(s, "\r\n") {
		return SignedGrant{}, fmt.Errorf("%w: a signed grant has no line breaks", ErrInvalidGrant)
	}
	body, ok := strings.CutPrefix(s, signedGrantPrefix)
	batched := false
	if !ok {
		body, batched = strings.CutPrefix(s, signedGrantBatchPrefix)
		if !batched {
			return SignedGrant{}, fmt.Errorf("%w: a signed grant starts with %q or %q", ErrInvalidGrant, signedGrantPrefix, signedGrantBatchPrefix)
		}
	}
	msgPart, sigPart, ok := strings.Cut(body, ".")
	if !ok {
		return SignedGrant{}, fmt.Errorf("%w: want %q, the grant, \".\" and the signature", ErrInvalidGrant, signedGrantPrefix)
	}
	enc := base64.RawURLEncoding.Strict()
	var proof *GrantBatchProof
	if batched {
		proofPart, rest, ok := strings.Cut(sigPart, ".")
		if !ok {
			return SignedGrant{}, fmt.Errorf("%w: want %q, the grant, \".\", the batch proof, \".\" and the signature", ErrInvalidGrant, signedGrantBatchPrefix)
		}
		b, err := enc.DecodeString(proofPart)
		if err != nil {
			return SignedGrant{}, fmt.Errorf("%w: the batch proof is not unpadded base64url: %v", ErrInvalidGrant, err)
		}
		if proof, err = decodeGrantBatchProof(b); err != nil {
			return SignedGrant{}, err
		}
		sigPart = rest
	}
	msg, err := enc.DecodeString(msgPart)
	if err != nil {
		return SignedGrant{}, fmt.Errorf("%w: the grant is not unpadded base64url: %v", ErrInvalidGrant, err)
	}
	sig, err := enc.DecodeString(sigPart)
	if err != nil {
		return SignedGrant{}, fmt.Errorf("%w: the signature is not unpadded base64url: %v", ErrInvalidGrant, err)
	}
	if len(sig) != ed25519.SignatureSize {
		return SignedGrant{}, fmt.Errorf("%w: the signature is %d bytes, want %d", ErrInvalidGrant, len(sig), ed25519.SignatureSize)
	}
	g, err := decodeSigningInput(msg)
	if err != nil {
		return SignedGrant{}, err
	}
	g.Signature, g.Batch = sig, proof
	return g, nil
}

// decodeSigningInput is the inverse of SigningInput; it accepts only the
// one canonical encoding of a tuple.
func decodeSigningInput(b []byte) (SignedGrant, error) {
	rest, ok := strings.CutPrefix(string(b), signedGrantMagic)
	if !ok {
		return SignedGrant{}, fmt.Errorf("%w: the grant does not start with the format %q", ErrInvalidGrant, strings.TrimSuffix(signedGrantMagic, "\x00"))
	}
	var fields [4]string
	for i := range fields {
		if len(rest) < 2 {
			return SignedGrant{}, fmt.Errorf("%w: the grant is truncated", ErrInvalidGrant)
		}
		n := int(binary.BigEndian.Uint16([]byte(rest[:2])))
		if len(rest) < 2+n {
			return SignedGrant{}, fmt.Errorf("%w: the grant is truncated", ErrInvalidGrant)
		}
		fields[i], rest = rest[2:2+n], rest[2+n:]
	}
	if len(rest) != 16 {
		return SignedGrant{}, fmt.Errorf("%w: the grant has %d bytes after its scope, want 16 (token and issue time)", ErrInvalidGrant, len(rest))
	}
	g := SignedGrant{
		KeyID: fields[0], Issuer: fields[1], Kind: Kind(fields[2]), Scope: fields[3],
		Token:    Token(binary.BigEndian.Uint64([]byte(rest[:8]))),
		IssuedAt: time.UnixMilli(int64(binary.BigEndian.Uint64([]byte(rest[8:])))).UTC(),
	}
	if _, err := g.SigningInput(); err != nil {
		return SignedGrant{}, err
	}
	return g, nil
}
