package fsm

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Limits of the signing keys (docs/design.md §10).
const (
	// MaxKeysKept is the most signing keys the state keeps published.
	MaxKeysKept = 16
	// DefaultKeysKept is how many keys a rotation keeps by default (the
	// new one and the two before it): a grant signed before a rotation
	// verifies until two more rotations.
	DefaultKeysKept = 3
)

// keyring holds the cluster's Ed25519 signing keys, oldest first; the
// last signs new grants. The proposer generates each seed (RotateKeys),
// so applying stays deterministic: every replica derives the same keys
// from the same seeds.
type keyring struct {
	keys []signingKey
}

var _ section = (*keyring)(nil)

type signingKey struct {
	id        string
	seed      []byte
	createdAt int64 // Unix ms
	priv      ed25519.PrivateKey
}

func newSigningKey(seed []byte, createdAt int64) (signingKey, error) {
	if len(seed) != ed25519.SeedSize {
		return signingKey{}, fmt.Errorf("%w: signing key seed is %d bytes, want %d", fence.ErrInvalidArgument, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return signingKey{id: fence.KeyIDOf(priv.Public().(ed25519.PublicKey)), seed: bytes.Clone(seed), createdAt: createdAt, priv: priv}, nil
}

// rotate adds the key of in and drops the oldest beyond in.keep. With
// in.bootstrap it does nothing (Ignored) when a key exists. A refused
// rotation changes nothing.
func (k *keyring) rotate(in *statev1.RotateKeys) Result {
	if in.GetBootstrap() && len(k.keys) > 0 {
		return Result{Ignored: true}
	}
	if keep := in.GetKeep(); keep < 1 || keep > MaxKeysKept {
		return Result{Err: fmt.Errorf("%w: keep %d keys is outside 1..%d", fence.ErrInvalidArgument, keep, MaxKeysKept)}
	}
	nk, err := newSigningKey(in.GetSeed(), in.GetCreatedAtUnixMs())
	if err != nil {
		return Result{Err: err}
	}
	for _, old := range k.keys {
		if old.id == nk.id {
			return Result{Err: fmt.Errorf("%w: signing key %s exists; a rotation needs a new seed", fence.ErrInvalidArgument, nk.id)}
		}
	}
	k.keys = append(k.keys, nk)
	if n := len(k.keys) - int(in.GetKeep()); n > 0 {
		k.keys = append([]signingKey(nil), k.keys[n:]...)
	}
	return Result{}
}

// SigningKeys returns the public signing keys, oldest first; the last
// signs new grants. None before the first leader took over.
func (m *Machine) SigningKeys() []fence.PublicKey {
	out := make([]fence.PublicKey, 0, len(m.keys.keys))
	for _, k := range m.keys.keys {
		out = append(out, fence.PublicKey{ID: k.id, CreatedAt: time.UnixMilli(k.createdAt).UTC(), Key: bytes.Clone(k.priv.Public().(ed25519.PublicKey))})
	}
	return out
}

// SigningKey returns the id and private key new grants are signed with;
// ok is false when the state has no key yet. The key must not be modified.
func (m *Machine) SigningKey() (id string, key ed25519.PrivateKey, ok bool) {
	if len(m.keys.keys) == 0 {
		return "", nil, false
	}
	k := m.keys.keys[len(m.keys.keys)-1]
	return k.id, k.priv, true
}

func (k *keyring) snapshot(st *statev1.State) {
	for _, key := range k.keys {
		st.SigningKeys = append(st.SigningKeys, &statev1.SigningKey{Id: key.id, Seed: key.seed, CreatedAtUnixMs: key.createdAt})
	}
}

func (k *keyring) restore(st *statev1.State) error {
	if n := len(st.GetSigningKeys()); n > MaxKeysKept {
		return broken("the snapshot lists %d signing keys, more than %d", n, MaxKeysKept)
	}
	seen := make(map[string]bool)
	for _, sk := range st.GetSigningKeys() {
		key, err := newSigningKey(sk.GetSeed(), sk.GetCreatedAtUnixMs())
		if err != nil {
			return fmt.Errorf("signing key %q: %w", sk.GetId(), err)
		}
		if key.id != sk.GetId() {
			return broken("signing key %q has the seed of key %q", sk.GetId(), key.id)
		}
		if seen[key.id] {
			return broken("the snapshot lists signing key %q twice", key.id)
		}
		seen[key.id] = true
		k.keys = append(k.keys, key)
	}
	return nil
}
