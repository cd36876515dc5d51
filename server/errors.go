package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/raftstore"
)

// errUnavailable is returned while the server cannot serve writes.
var errUnavailable = errors.New("server is shutting down or has no leader; retry on another endpoint")

// toConnect maps an error to the Connect code callers branch on, keeping
// its message.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := connect.CodeInternal
	switch {
	case errors.Is(err, fence.ErrInvalidArgument), errors.Is(err, fence.ErrInvalidToken):
		code = connect.CodeInvalidArgument
	case errors.Is(err, fence.ErrSessionNotFound):
		code = connect.CodeNotFound
	case errors.Is(err, fence.ErrTokenOverflow):
		code = connect.CodeResourceExhausted
	case errors.Is(err, raftstore.ErrOutcomeUnknown):
		code = connect.CodeUnavailable
	case errors.Is(err, fence.ErrNotLeader), errors.Is(err, errUnavailable), errors.Is(err, raftstore.ErrShutdown):
		code = connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	}
	return connect.NewError(code, err)
}
