package fence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// GrantVerifier checks the wire form of a signed grant (SignedGrant's
// String) and returns the grant it proves. A *KeySet is one; a verifier
// that refreshes its keys from the cluster is another.
type GrantVerifier interface {
	VerifyGrant(encoded string) (SignedGrant, error)
}

// PublicKey is one public signing key of a cluster.
type PublicKey struct {
	// ID is the key id grants carry (SignedGrant.KeyID).
	ID string
	// CreatedAt is when the key was created (the proposing leader's clock).
	CreatedAt time.Time
	// Key is the Ed25519 public key.
	Key ed25519.PublicKey
}

// KeyIDOf returns the id the cluster gives public key pub: the first 8
// bytes of its SHA-256 in hexadecimal (16 digits).
func KeyIDOf(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// KeySet is the public signing keys of one issuer: what
// GET /.well-known/fenced-keys returns and client.SigningKeys fetches. It
// verifies signed grants offline. A KeySet is immutable and safe for
// concurrent use; to learn of a rotation, load the keys again.
type KeySet struct {
	issuer  string
	current string
	keys    []PublicKey // in the order given: the cluster's is oldest first
	byID    map[string]PublicKey
}

var _ GrantVerifier = (*KeySet)(nil)

// NewKeySet returns the key set of issuer with keys; current is the id of
// the key new grants are signed with ("" if unknown). It fails on an empty
// issuer, an empty or repeated key id, a key of the wrong size or a
// current key not among keys.
func NewKeySet(issuer, current string, keys []PublicKey) (*KeySet, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: key set without an issuer", ErrInvalidArgument)
	}
	ks := &KeySet{issuer: issuer, current: current, keys: make([]PublicKey, 0, len(keys)), byID: make(map[string]PublicKey, len(keys))}
	for _, k := range keys {
		switch {
		case k.ID == "" || len(k.ID) > MaxGrantFieldLen:
			return nil, fmt.Errorf("%w: key id %q is empty or longer than %d bytes", ErrInvalidArgument, k.ID, MaxGrantFieldLen)
		case len(k.Key) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("%w: key %q is %d bytes, want an Ed25519 public key of %d", ErrInvalidArgument, k.ID, len(k.Key), ed25519.PublicKeySize)
		}
		if _, dup := ks.byID[k.ID]; dup {
			return nil, fmt.Errorf("%w: key id %q appears twice", ErrInvalidArgument, k.ID)
		}
		k.Key = bytes.Clone(k.Key)
		ks.keys = append(ks.keys, k)
		ks.byID[k.ID] = k
	}
	if _, ok := ks.key(current); current != "" && !ok {
		return nil, fmt.Errorf("%w: the current key %q is not in the set", ErrInvalidArgument, current)
	}
	return ks, nil
}

// Issuer returns the issuer whose keys these are.
func (ks *KeySet) Issuer() string { return ks.issuer }

// Current returns the id of the key new grants are signed with, "" if
// unknown.
func (ks *KeySet) Current() string { return ks.current }

// Keys returns the keys in the order given (from the cluster: oldest
// first, the current one last).
func (ks *KeySet) Keys() []PublicKey {
	out := make([]PublicKey, len(ks.keys))
	copy(out, ks.keys)
	return out
}

// Has reports whether the set holds the key id.
func (ks *KeySet) Has(id string) bool {
	_, ok := ks.byID[id]
	return ok
}

func (ks *KeySet) key(id string) (PublicKey, bool) {
	k, ok := ks.byID[id]
	return k, ok
}

// VerifyGrant decodes a signed grant's wire form and checks it: it must
// be well formed (an error matching ErrInvalidGrant), from this set's
// issuer (ErrIssuerMismatch, and ErrInvalidGrant), signed by a key of
// this set (ErrInvalidGrant: load the keys again if the cluster rotated
// since) with a signature that verifies (ErrInvalidGrant). It does not
// check the token or scope against a request: guard.Signed does.
func (ks *KeySet) VerifyGrant(encoded string) (SignedGrant, error) {
	g, err := ParseSignedGrant(encoded)
	if err != nil {
		return SignedGrant{}, err
	}
	if g.Issuer != ks.issuer {
		return SignedGrant{}, fmt.Errorf("%w: %w: the grant was issued by %q, these keys are issuer %q's", ErrInvalidGrant, ErrIssuerMismatch, g.Issuer, ks.issuer)
	}
	k, ok := ks.key(g.KeyID)
	if !ok {
		return SignedGrant{}, fmt.Errorf("%w: signed by key %q, which issuer %q does not publish (%d keys known); fetch the keys again if the cluster rotated them", ErrInvalidGrant, g.KeyID, ks.issuer, len(ks.keys))
	}
	msg, err := g.signedMessage()
	if err != nil {
		return SignedGrant{}, err
	}
	if !ed25519.Verify(k.Key, msg, g.Signature) {
		return SignedGrant{}, fmt.Errorf("%w: the signature does not verify with key %q of issuer %q: the grant was altered or forged", ErrInvalidGrant, g.KeyID, ks.issuer)
	}
	return g, nil
}

// keySetJSON is the document of GET /.well-known/fenced-keys.
type keySetJSON struct {
	Issuer  string    `json:"issuer"`
	Current string    `json:"current"`
	Keys    []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// PublicKey is the 32-byte Ed25519 key in standard base64.
	PublicKey []byte `json:"public_key"`
}

// MarshalJSON returns the document GET /.well-known/fenced-keys serves:
//
//	{"issuer":"…","current":"…","keys":[{"id":"…","created_at":"RFC 3339","public_key":"standard base64"}]}
func (ks *KeySet) MarshalJSON() ([]byte, error) {
	doc := keySetJSON{Issuer: ks.issuer, Current: ks.current, Keys: []keyJSON{}}
	for _, k := range ks.keys {
		doc.Keys = append(doc.Keys, keyJSON{ID: k.ID, CreatedAt: k.CreatedAt.UTC(), PublicKey: k.Key})
	}
	return json.Marshal(doc)
}

// LoadKeySet builds a KeySet from the document of
// GET /.well-known/fenced-keys (MarshalJSON gives its form). It fails with
// an error matching ErrInvalidArgument on a document that does not parse
// or whose keys NewKeySet refuses.
func LoadKeySet(data []byte) (*KeySet, error) {
	var doc keySetJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: key set: %v", ErrInvalidArgument, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: key set: data after the document", ErrInvalidArgument)
	}
	keys := make([]PublicKey, 0, len(doc.Keys))
	for _, k := range doc.Keys {
		keys = append(keys, PublicKey{ID: k.ID, CreatedAt: k.CreatedAt, Key: k.PublicKey})
	}
	ks, err := NewKeySet(doc.Issuer, doc.Current, keys)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	return ks, nil
}
