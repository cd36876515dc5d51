package guard

import (
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// Mode says where a server's atomic step of check, write and raise happens:
// in the handler, or around it. It configures the HTTP middleware
// (httpfence) and the gRPC interceptors (grpcfence) alike; each says what
// counts as a handler's success and when its response is sent.
type Mode int

const (
	// InHandler, the default: the middleware or interceptor validates the
	// request's token, object and issuer, rejects what is malformed, and
	// passes the handler a context carrying them (WithFence). The handler
	// makes its write through Do (the fence.Guard's atomic step) or through
	// its own guard with the token of TokenFrom. A handler that writes
	// without either is not fenced.
	InHandler Mode = iota
	// AroundHandler: the middleware or interceptor runs the whole handler
	// as the apply of Do: check, then the handler, then the raise of the
	// watermark only if the handler succeeded. Requests for one object are
	// served one at a time (with a *Memory guard, all fenced requests are,
	// as Memory has one lock). With a *Memory guard this protects a
	// resource only when every write to it goes through this one process:
	// the lock and the watermarks live in this process's memory, so a
	// second replica (or a restart, which forgets the watermarks) is not
	// fenced. The handler must finish its write before it returns.
	AroundHandler
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case InHandler:
		return "InHandler"
	case AroundHandler:
		return "AroundHandler"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Validate reports a mode a server cannot run with g: one that is neither
// InHandler nor AroundHandler, or AroundHandler without a fence.Guard (g
// nil). InHandler needs none when handlers use their own guard.
func (m Mode) Validate(g fence.Guard) error {
	switch m {
	case InHandler:
	case AroundHandler:
		if g == nil {
			return errors.New("guard: AroundHandler mode needs a fence.Guard; set Config.Guard (for example &guard.Memory{} or a postgres.Guard)")
		}
	default:
		return fmt.Errorf("guard: unknown mode %d; want InHandler or AroundHandler", int(m))
	}
	return nil
}
