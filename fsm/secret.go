package fsm

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// Session ownership. Every session has a secret that only its creator
// knows; the state keeps its SHA-256 (SecretHashLen bytes) and never the
// secret. Each command that acts for a session (close, release, acquire,
// and the creation of a per-grant session) carries the hash of the secret
// its request presented, and the Machine compares it with the session's:
// the comparison is part of the deterministic apply, so every replica
// refuses the same commands whichever node proposed them.
//
// A session restored from a snapshot (or created by a log entry) written
// before sessions had secrets has no hash. It accepts only commands
// without one, which the server never proposes any more: the entries of
// old logs replay as they were applied, and such a session is kept by
// nobody and expires.

// SecretHashLen is the length of a session secret's hash (SHA-256).
const SecretHashLen = sha256.Size

// HashSecret returns the hash of a secret as the state keeps it.
func HashSecret(secret []byte) []byte {
	h := sha256.Sum256(secret)
	return h[:]
}

// validateSecretHash refuses a command whose hash has the wrong length.
// An empty hash is left to checkOwner.
func validateSecretHash(hash []byte) error {
	if len(hash) != 0 && len(hash) != SecretHashLen {
		return fmt.Errorf("%w: secret hash is %d bytes, want %d", fence.ErrInvalidArgument, len(hash), SecretHashLen)
	}
	return nil
}

// checkOwner refuses hash unless it is the hash of s's secret. Both empty
// is a session and a command from before secrets (see above).
func (s *session) checkOwner(hash []byte) error {
	if !s.hasSecret && len(hash) == 0 {
		return nil
	}
	if !s.hasSecret {
		return fmt.Errorf("%w: session %d was created before sessions had secrets, so no request can prove it is its owner; it expires after its TTL", fence.ErrNotOwner, s.id)
	}
	if subtle.ConstantTimeCompare(s.secretHash[:], hash) != 1 {
		return fmt.Errorf("%w: the request did not carry session %d's secret; only the session's creator may renew, close or release it, or acquire for it", fence.ErrNotOwner, s.id)
	}
	return nil
}

// checkOwner is s.checkOwner, unless a test build's negative control
// lets every request act for every session (SetAnyOwner).
func (m *Machine) checkOwner(s *session, hash []byte) error {
	if m.faults.anyOwner() {
		return nil
	}
	return s.checkOwner(hash)
}

// CheckOwner reports whether hash is the hash of session id's secret:
// nil, an error wrapping fence.ErrSessionNotFound, or one wrapping
// fence.ErrNotOwner. The server checks requests with it before proposing
// their commands (and for renewals, which are not commands); Apply checks
// the same again.
func (m *Machine) CheckOwner(id uint64, hash []byte) error {
	s := m.sessions[id]
	if s == nil {
		return errSessionNotFound(id)
	}
	if len(hash) == 0 {
		return fmt.Errorf("%w: the request carries no secret for session %d; send the secret its creation returned", fence.ErrNotOwner, id)
	}
	return m.checkOwner(s, hash)
}

func errSessionNotFound(id uint64) error {
	return fmt.Errorf("%w: session %d does not exist (expired, closed or never created); create a new session", fence.ErrSessionNotFound, id)
}
