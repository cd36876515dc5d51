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
	b, err := hex.DecodeString(secret)
	if err != nil || len(b) != secretLen {
		return nil, fmt.Errorf("%w: secret is not %d hexadecimal digits", fence.ErrInvalidArgument, 2*secretLen)
	}
	return fsm.HashSecret(b), nil
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

// checkOwner refuses a request for session sid whose secret is not the
// session's, before anything is proposed: the fast path. The state
// machine checks the same hash again when it applies the command, so a
// command that raced a change is still judged on the state it applies to.
// With missingOK, a session that does not exist is let through (closing
// or releasing for it changes nothing).
func (s *Server) checkOwner(sid uint64, secret string, missingOK bool) ([]byte, error) {
	h, err := secretHash(secret)
	if err != nil {
		return nil, err
	}
	s.sm.read(func(m *fsm.Machine) { err = m.CheckOwner(sid, h) })
	if missingOK && errors.Is(err, fence.ErrSessionNotFound) {
		err = nil
	}
	return h, err
}
