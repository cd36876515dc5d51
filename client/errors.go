package client

import (
	"errors"
	"strings"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
)

// Errors of the SDK itself. The errors the server reports are translated to
// the errors of package fence (fence.ErrInvalidArgument,
// fence.ErrSessionNotFound, fence.ErrNotGranted, fence.ErrTokenOverflow,
// fence.ErrNotLeader) and keep the server's message; check all of them with
// errors.Is.
var (
	// ErrClosed reports a call on a Client that was closed, and is the
	// reason its sessions were lost.
	ErrClosed = errors.New("client: closed")
	// ErrSessionClosed reports a session that its holder closed. It is the
	// Err of a session after Close, and the cause of its grants' contexts.
	ErrSessionClosed = errors.New("client: session closed")
	// ErrExpired reports a session or TTL lock whose validity, measured by the
	// client from before the request that granted or last renewed it, ran
	// out without a confirmed renewal. The server may still hold it for a
	// little longer; the SDK no longer trusts it. It comes wrapped together
	// with fence.ErrLockLost.
	ErrExpired = errors.New("client: validity ran out without a confirmed renewal")
	// ErrNotHeld is the cause of a Mutex's or TTLLock's Context when it holds
	// no grant: before the first Lock, and after Unlock or Release.
	ErrNotHeld = errors.New("client: lock not held")
	// ErrNotOwned reports an Unlock or Release of a lock that another
	// session holds. Nothing was changed on the server.
	ErrNotOwned = errors.New("client: lock held by another session")
)

// serverError is an error the server reported, translated to its fence
// error. It matches both the fence error and the *connect.Error.
type serverError struct {
	kind error
	err  *connect.Error
}

func (e *serverError) Error() string {
	msg := strings.TrimPrefix(e.err.Message(), e.kind.Error())
	msg = strings.TrimPrefix(msg, ": ")
	if msg == "" {
		return e.kind.Error()
	}
	return e.kind.Error() + ": " + msg
}

func (e *serverError) Unwrap() []error { return []error{e.kind, e.err} }

// fromServer translates a connect error to the fence error of its code.
// Errors of other kinds are returned unchanged.
func fromServer(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	var kind error
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		kind = fence.ErrInvalidArgument
	case connect.CodeNotFound:
		kind = fence.ErrSessionNotFound
	case connect.CodeResourceExhausted:
		kind = fence.ErrTokenOverflow
	default:
		if isNotLeader(ce.Message()) {
			kind = fence.ErrNotLeader
		}
	}
	if kind == nil {
		return err
	}
	return &serverError{kind: kind, err: ce}
}
