package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	"github.com/fenced-dev/fenced/raftstore"
)

// errUnavailable is returned while the server cannot serve writes.
var errUnavailable = errors.New("server is shutting down or has no leader; retry on another endpoint")

// toConnect maps an error to the Connect error callers branch on, keeping
// its message. A fence error gets the code, reason and fields of package
// wire (wireconnect.Error), which the SDK decodes back to the same fence
// error; the server's own errors get the code that tells a client whether
// to retry.
func toConnect(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	if ce, ok := wireconnect.Error(err); ok {
		return ce
	}
	code := connect.CodeInternal
	switch {
	case errors.Is(err, raftstore.ErrOutcomeUnknown), errors.Is(err, errUnavailable), errors.Is(err, raftstore.ErrShutdown):
		code = connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	}
	return connect.NewError(code, err)
}
