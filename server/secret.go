package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
)

// secretLen is the length of a session secret: 128 random bits, sent as 32
// hexadecimal digits.
const secretLen = 16

// secretHash returns the hash of a secret a request presented, as the
// state machine compares it with the session's (fsm/secret.go). A missing
// secret fails with fence.ErrNotOwner, a malformed one with
// fence.ErrInvalidArgument.
func secretHash(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: the request carries no session secret; send the secret the session's creation returned", fence.ErrNotOwner)
	}
	var b [secretLen]byte // decoded on the stack: this runs on every call
	if len(secret) != 2*secretLen {
		return nil, fmt.Errorf("%w: secret is not %d hexadecimal digits", fence.ErrInvalidArgument, 2*secretLen)
	}
	if _, err := hex.Decode(b[:], []byte(secret)); err != nil {
		return nil, fmt.Errorf("%w: secret is not %d hexadecimal digits", fence.ErrInvalidArgument, 2*secretLen)
	}
	return fsm.HashSecret(b[:]), nil
}

// newSessionSecret returns the secret of a session created by a request
// that brought none (it sent "" as secret), and its hash; otherwise the
// hash of the one sent.
func newSessionSecret(sent string) (string, []byte, error) {
	if sent != "" {
		h, err := secretHash(sent)
		return sent, h, err
	}
	var b [secretLen]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:]), fsm.HashSecret(b[:]), nil
}

// presented is the secret a request presented: its hash, or why it has
// none (missing or malformed).
type presented struct {
	hash []byte
	err  error
}

func present(secret string) presented {
	h, err := secretHash(secret)
	return presented{h, err}
}

// check returns nil when the secret is session sid's; an error wrapping
// fence.ErrSessionNotFound when there is no such session (whatever the
// secret); otherwise why the secret is missing, malformed or wrong.
func (p presented) check(m *fsm.Machine, sid uint64) error {
	err := m.CheckOwner(sid, p.hash)
	if p.err != nil && !errors.Is(err, fence.ErrSessionNotFound) {
		return p.err
	}
	return err
}

// checkOwner refuses a request for session sid whose secret is not the
// session's, before anything is proposed: the fast path. The state
// machine checks the same hash again when it applies the command, so a
// command that raced a change is still judged on the state it applies to.
// With missingOK, a session that does not exist is let through when the
// secret is well formed (closing or releasing for it changes nothing). It
// returns the hash for the command.
func (s *Server) checkOwner(sid uint64, secret string, missingOK bool) ([]byte, error) {
	p := present(secret)
	var err error
	s.sm.read(func(m *fsm.Machine) { err = p.check(m, sid) })
	if missingOK && errors.Is(err, fence.ErrSessionNotFound) {
		err = p.err
	}
	return p.hash, err
}
