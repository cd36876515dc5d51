package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/nativewire"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Protocol is how a Client carries its Pipeline stream (Acquire, Release,
// KV Put and queue calls) and its KeepAlive stream (session renewals).
// Every other call is Connect over HTTP/2 either way.
type Protocol int

const (
	// ProtocolAuto, the default, uses the native protocol when the
	// server offers it and Connect when it does not (an older server, a
	// proxy in between that does not pass it, fenced serve --native=false).
	// With WithHTTPClient it uses Connect: the caller's transport decides.
	ProtocolAuto Protocol = iota
	// ProtocolNative uses only the native protocol: length-prefixed
	// protobuf frames on one connection to the API port, both streams on
	// it (docs/design.md, "The native protocol"). A server that does not
	// offer it fails the calls with Unavailable.
	ProtocolNative
	// ProtocolConnect uses only Connect streams over HTTP/2.
	ProtocolConnect
)

// String returns auto, native or connect.
func (p Protocol) String() string {
	switch p {
	case ProtocolAuto:
		return "auto"
	case ProtocolNative:
		return "native"
	case ProtocolConnect:
		return "connect"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// ParseProtocol returns the Protocol named auto, native or connect.
func ParseProtocol(s string) (Protocol, error) {
	for _, p := range []Protocol{ProtocolAuto, ProtocolNative, ProtocolConnect} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("client: %w: protocol %q; want auto, native or connect", fence.ErrInvalidArgument, s)
}

// WithProtocol sets how the Client carries its Pipeline and KeepAlive
// streams; the default is ProtocolAuto.
func WithProtocol(p Protocol) Option {
	return func(o *options) { o.protocol = p }
}

// clientStream is the Client's side of a bidirectional stream: a Connect
// stream or a native one.
type clientStream[Req, Resp any] interface {
	Send(*Req) error
	Receive() (*Resp, error)
	CloseRequest() error
	CloseResponse() error
}

// abortConn closes the connection of stream when it is native and
// nothing arrived on it since since; a Connect stream's connection is
// left to its transport.
func abortConn(stream any, err error, since time.Time) {
	if a, ok := stream.(interface{ abortConn(error, time.Time) }); ok {
		a.abortConn(err, since)
	}
}

// failedStream is a stream that could not be opened: every call returns
// its error.
type failedStream[Req, Resp any] struct{ err error }

func (s failedStream[Req, Resp]) Send(*Req) error         { return s.err }
func (s failedStream[Req, Resp]) Receive() (*Resp, error) { return nil, s.err }
func (s failedStream[Req, Resp]) CloseRequest() error     { return nil }
func (s failedStream[Req, Resp]) CloseResponse() error    { return nil }

// openPipeline opens a Pipeline stream to ep: native when the Client uses
// it and ep offers it, Connect otherwise.
func (c *Client) openPipeline(ctx context.Context, ep *endpoint) clientStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse] {
	if c.usesNative() {
		nc, err := c.nativeConn(ep)
		if err != nil {
			return failedStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]{err}
		}
		if nc != nil {
			return nativePipeline{nc.open(nativewire.KindPipeline)}
		}
	}
	return ep.locks.Pipeline(ctx)
}

// openKeepAlive opens a KeepAlive stream to ep natively, or returns nil
// when it is to be a Connect stream.
func (c *Client) openKeepAlive(ep *endpoint) (clientStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse], bool) {
	if !c.usesNative() {
		return nil, false
	}
	nc, err := c.nativeConn(ep)
	if err != nil {
		return failedStream[fencedv1.KeepAliveRequest, fencedv1.KeepAliveResponse]{err}, true
	}
	if nc == nil {
		return nil, false
	}
	return nativeKeepAlive{nc.open(nativewire.KindKeepAlive)}, true
}

// lazyStream opens its stream with open on first use, from whichever
// goroutine uses it first; the others wait for it. CloseResponse before
// any use opens nothing, and the stream's later uses fail.
type lazyStream[Req, Resp any] struct {
	open func() clientStream[Req, Resp]

	mu     sync.Mutex
	s      clientStream[Req, Resp]
	closed bool
	// opened is s once open returned, read without mu (abortConn is
	// called under the keeper's lock and must not wait for a dial).
	opened atomic.Pointer[clientStream[Req, Resp]]
}

func (l *lazyStream[Req, Resp]) get() clientStream[Req, Resp] {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil {
		if l.closed {
			l.s = failedStream[Req, Resp]{connect.NewError(connect.CodeCanceled, errors.New("stream closed before it was opened"))}
		} else {
			l.s = l.open()
		}
		l.opened.Store(&l.s)
	}
	return l.s
}

func (l *lazyStream[Req, Resp]) Send(m *Req) error       { return l.get().Send(m) }
func (l *lazyStream[Req, Resp]) Receive() (*Resp, error) { return l.get().Receive() }
func (l *lazyStream[Req, Resp]) CloseRequest() error     { return l.get().CloseRequest() }

// CloseResponse implements clientStream; it opens nothing.
func (l *lazyStream[Req, Resp]) CloseResponse() error {
	l.mu.Lock()
	s := l.s
	l.closed = true
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.CloseResponse()
}

// receiveEach passes receiveEach on to the stream, opening it, when it
// has one (a native stream); ok is false when it has not, and then
// nothing was received.
func (l *lazyStream[Req, Resp]) receiveEach(f func(*Resp)) (err error, ok bool) {
	r, ok := l.get().(interface{ receiveEach(func(*Resp)) error })
	if !ok {
		return nil, false
	}
	return r.receiveEach(f), true
}

// direct reports whether the opened stream's sends may be made by the
// callers themselves (a native stream's); false before it was opened.
func (l *lazyStream[Req, Resp]) direct() bool {
	s := l.opened.Load()
	if s == nil {
		return false
	}
	d, ok := (*s).(interface{ direct() bool })
	return ok && d.direct()
}

// abortConn passes abortConn on to the stream, if it was opened.
func (l *lazyStream[Req, Resp]) abortConn(err error, since time.Time) {
	if s := l.opened.Load(); s != nil {
		abortConn(*s, err, since)
	}
}
