package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/nativewire"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// The client side of the native protocol (docs/design.md §6): one
// connection per endpoint, dialed by the first stream that needs it and
// shared by the pipeline and the keeper; streams behind clientStream
// (protocol.go), so pipeline.go and keepalive.go drive both protocols
// with the same code.

// Pauses before the native protocol is tried again on an endpoint where it
// failed, using Connect meanwhile: long when the server did not speak it,
// short when it did and refused (a follower) or could not be reached.
const (
	nativeRetryNotOffered = time.Minute
	nativeRetryRefused    = time.Second
)

// maxNativeAnswerBytes bounds a frame the Client reads.
const maxNativeAnswerBytes = 64 << 20

// errNativeNotOffered is wrapped when the server does not speak the native
// protocol.
var errNativeNotOffered = errors.New("the server does not offer the native protocol")

// errMovedToLeader is the refusal of a follower that named a leader the
// Client moved its calls to.
type errMovedToLeader struct{ err error }

func (e errMovedToLeader) Error() string { return e.err.Error() }
func (e errMovedToLeader) Unwrap() error { return e.err }

// nativeEndpoint is an endpoint's native connection.
type nativeEndpoint struct {
	mu      sync.Mutex
	conn    *nativeConn // nil until dialed and after it failed
	retryAt time.Time   // before this, Auto uses Connect
}

// usesNative reports whether streams try the native protocol at all.
func (c *Client) usesNative() bool {
	return c.protocol == ProtocolNative || c.protocol == ProtocolAuto && c.ownTransport != nil
}

// nativeConn returns ep's native connection, dialing one when it has
// none. In ProtocolAuto it returns nil, nil while the native protocol is
// to be left alone on ep (it failed there lately).
func (c *Client) nativeConn(ep *endpoint) (*nativeConn, error) {
	ep.nat.mu.Lock()
	defer ep.nat.mu.Unlock()
	if ep.nat.conn != nil {
		return ep.nat.conn, nil
	}
	if c.protocol == ProtocolAuto && time.Now().Before(ep.nat.retryAt) {
		return nil, nil
	}
	nc, err := c.dialNative(ep)
	if errors.As(err, new(errMovedToLeader)) {
		// A follower named the leader and the Client moved there: the
		// call fails as unavailable, and its retry goes to the leader.
		return nil, err
	}
	if err != nil {
		pause := nativeRetryRefused
		if errors.Is(err, errNativeNotOffered) {
			pause = nativeRetryNotOffered
		}
		ep.nat.retryAt = time.Now().Add(pause)
		c.log.Debug("fenced: native protocol not used", "endpoint", ep.addr, "err", err)
		if c.protocol == ProtocolAuto {
			return nil, nil
		}
		return nil, err
	}
	ep.nat.conn = nc
	return nc, nil
}

// dialNative connects to ep and does the handshake: the preface (or ALPN
// over TLS), the hello with the bearer token, the welcome.
func (c *Client) dialNative(ep *endpoint) (*nativeConn, error) {
	ctx, cancel := context.WithTimeout(c.ctx, min(c.requestTimeout, 5*time.Second))
	defer cancel()
	u, _ := url.Parse(ep.url)
	d := &net.Dialer{KeepAlive: 15 * time.Second}
	var conn net.Conn
	var err error
	var out []byte
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.tls != nil {
			cfg = c.tls.Clone()
		}
		cfg.NextProtos = []string{nativewire.ALPN, "h2"}
		td := &tls.Dialer{NetDialer: d, Config: cfg}
		conn, err = td.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("native dial: %w", err))
		}
		if p := conn.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != nativewire.ALPN {
			conn.Close()
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w (TLS chose %q)", errNativeNotOffered, p))
		}
	} else {
		if conn, err = d.DialContext(ctx, "tcp", u.Host); err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("native dial: %w", err))
		}
		out = append(out, nativewire.Preface...)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	hello := &fencedv1.NativeHello{Version: nativewire.Version}
	if c.token != "" {
		hello.Authorization = "Bearer " + c.token
	}
	out, _ = nativewire.AppendFrame(out, nativewire.KindHello, 0, hello)
	r := bufio.NewReaderSize(conn, 4<<10)
	var welcome fencedv1.NativeWelcome
	if _, err = conn.Write(out); err == nil {
		var f nativewire.Frame
		if f, err = nativewire.ReadFrame(r, 1<<16); err == nil {
			if f.Kind != nativewire.KindWelcome {
				err = fmt.Errorf("%w: the first frame is of kind %d", nativewire.ErrMalformed, f.Kind)
			} else {
				err = proto.Unmarshal(f.Payload, &welcome)
			}
		}
	}
	if err != nil {
		conn.Close()
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %v", errNativeNotOffered, err))
	}
	if welcome.Code != 0 {
		conn.Close()
		err := connect.NewError(connect.Code(welcome.Code), errors.New(welcome.Message))
		if welcome.Leader != "" && c.followLeaderOn {
			before := c.cur.Load()
			c.followLeader(ep.host, welcome.Leader)
			if c.cur.Load() != before {
				return nil, errMovedToLeader{err}
			}
		}
		return nil, err
	}
	stop()
	_ = conn.SetDeadline(time.Time{})
	nc := &nativeConn{c: c, ep: ep, conn: conn, r: r, streams: make(map[uint32]*nativeStream), done: make(chan struct{})}
	ok := c.goRun(nc.readLoop)
	ok = ok && c.goRun(func() {
		select {
		case <-c.ctx.Done():
			nc.close(ErrClosed)
		case <-nc.done:
		}
	})
	if !ok {
		// The caller (nativeConn) holds ep.nat.mu and nc was never
		// published there: end it without detaching it from ep, which
		// would lock ep.nat.mu again (a Close racing a dial hung there).
		nc.end(ErrClosed)
		return nil, ErrClosed
	}
	return nc, nil
}

// nativeConn is an open native connection to one endpoint; its streams
// share it.
type nativeConn struct {
	c    *Client
	ep   *endpoint
	conn net.Conn
	r    *bufio.Reader
	done chan struct{} // closed by close
	// lastRecv is when the last frame arrived (Unix nanoseconds).
	lastRecv atomic.Int64

	wmu       sync.Mutex
	wbuf      []byte
	wdeadline nativewire.WriteDeadline // bounds the writes, with wmu

	mu      sync.Mutex
	streams map[uint32]*nativeStream
	nextID  uint32
	err     error // why it closed
}

// close ends the connection and all its streams with err, once, and
// detaches it from its endpoint so the next stream dials anew.
func (nc *nativeConn) close(err error) {
	streams, ok := nc.end(err)
	if !ok {
		return
	}
	ep := nc.ep
	ep.nat.mu.Lock()
	if ep.nat.conn == nc {
		ep.nat.conn = nil
	}
	ep.nat.mu.Unlock()
	for _, st := range streams {
		st.finish(connect.NewError(connect.CodeUnavailable, fmt.Errorf("native connection: %w", err)))
	}
}

// end marks nc closed with err and closes its socket; it returns the
// streams that were open, and false when nc had already ended.
func (nc *nativeConn) end(err error) (map[uint32]*nativeStream, bool) {
	nc.mu.Lock()
	if nc.err != nil {
		nc.mu.Unlock()
		return nil, false
	}
	nc.err = err
	streams := nc.streams
	nc.streams = nil
	close(nc.done)
	nc.mu.Unlock()
	nc.conn.Close()
	return streams, true
}

// open starts a stream of kind. It gets its id, and the server sees it,
// with its first frame: ids must grow in the order streams' first frames
// are sent.
func (nc *nativeConn) open(kind nativewire.Kind) *nativeStream {
	st := &nativeStream{nc: nc, kind: kind, signal: make(chan struct{}, 1)}
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.err != nil {
		st.end = connect.NewError(connect.CodeUnavailable, fmt.Errorf("native connection: %w", nc.err))
	}
	return st
}

// write sends one frame of st (nil: of stream 0); a failed write closes
// the connection. A stream's first frame gives it its id.
func (nc *nativeConn) write(kind nativewire.Kind, st *nativeStream, m proto.Message) error {
	nc.wmu.Lock()
	defer nc.wmu.Unlock()
	var id uint32
	if st != nil {
		nc.mu.Lock()
		if st.id == 0 && nc.err == nil {
			nc.nextID++
			st.id = nc.nextID
			nc.streams[st.id] = st
		}
		id = st.id
		err := nc.err
		nc.mu.Unlock()
		if err != nil {
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("native connection: %w", err))
		}
	}
	buf, err := nativewire.AppendFrame(nc.wbuf[:0], kind, id, m)
	if err != nil {
		return connect.NewError(connect.CodeInternal, err)
	}
	// A write blocks only while the socket's buffer is full: the server
	// stopped reading. Bounded, so that a caller writing its own call
	// (pipeStream.flush) is not held past its context for long; a
	// connection that took no frame for that long is closed.
	if err = nc.wdeadline.Extend(nc.conn, nc.c.requestTimeout); err == nil {
		_, err = nc.conn.Write(buf)
	}
	if cap(buf) <= 64<<10 {
		nc.wbuf = buf
	}
	if err != nil {
		nc.close(err)
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("native write: %w", err))
	}
	return nil
}

// readLoop hands each frame to its stream until the connection fails
// (nativewire.Reader: a payload is valid until dispatch returns; a stream
// that decodes its frames here, a handler, keeps nothing of it, and
// deliver copies a frame it queues).
func (nc *nativeConn) readLoop() {
	err := nativewire.NewReader(nc.conn, nc.r, maxNativeAnswerBytes).Run(func(f nativewire.Frame) error {
		nc.lastRecv.Store(time.Now().UnixNano())
		return nc.dispatch(f)
	})
	nc.close(err)
}

func (nc *nativeConn) dispatch(f nativewire.Frame) error {
	if f.Kind == nativewire.KindEnd && f.Stream == 0 {
		var e fencedv1.PipelineError
		_ = proto.Unmarshal(f.Payload, &e)
		return fmt.Errorf("the server closed the connection: %s", e.GetMessage())
	}
	nc.mu.Lock()
	st := nc.streams[f.Stream]
	if f.Kind == nativewire.KindEnd {
		delete(nc.streams, f.Stream)
	}
	nc.mu.Unlock()
	switch f.Kind {
	case nativewire.KindPipeline, nativewire.KindKeepAlive:
		if st != nil {
			if st.kind != f.Kind {
				return fmt.Errorf("%w: a frame of kind %d on stream %d of kind %d", nativewire.ErrMalformed, f.Kind, f.Stream, st.kind)
			}
			if err := st.deliver(f.Payload); err != nil {
				return err
			}
		}
	case nativewire.KindEnd:
		if st != nil {
			var e fencedv1.PipelineError
			if err := proto.Unmarshal(f.Payload, &e); err != nil {
				return fmt.Errorf("%w: stream end: %v", nativewire.ErrMalformed, err)
			}
			if e.Code == 0 {
				st.finish(io.EOF)
			} else {
				st.finish(pipelineError(&e))
				if connect.Code(e.Code) == connect.CodeUnavailable {
					// This node stopped leading: the next stream redials,
					// and is told where the leader is.
					return errors.New("the server ended a stream as unavailable")
				}
			}
		}
	default:
		return fmt.Errorf("%w: a server sends no frame of kind %d after its welcome", nativewire.ErrMalformed, f.Kind)
	}
	return nil
}

// nativeStream is one stream of a native connection, with the methods of
// a Connect client stream (clientStream) through nativePipeline and
// nativeKeepAlive.
type nativeStream struct {
	nc     *nativeConn
	id     uint32 // 0 until its first frame; set under nc.mu
	kind   nativewire.Kind
	signal chan struct{} // capacity 1: a frame or the end arrived

	mu    sync.Mutex
	queue [][]byte
	// handler, once set (receiveEach), decodes each frame in the
	// connection's reader instead of queueing it for receive.
	handler    func(payload []byte) error
	end        error // set once: io.EOF when the server ended it cleanly
	sendClosed bool
}

// deliver hands the payload of a frame to the stream: to its handler, or
// a copy of it to its queue (b is the reader's buffer). An error (a frame
// that does not decode) closes the connection.
func (st *nativeStream) deliver(b []byte) error {
	st.mu.Lock()
	if h := st.handler; h != nil {
		st.mu.Unlock()
		return h(b)
	}
	st.queue = append(st.queue, bytes.Clone(b))
	st.mu.Unlock()
	st.poke()
	return nil
}

// receiveEach makes handler take every frame of the stream from now on,
// those already queued first, in the connection's reader (so it must not
// block), and waits for the stream's end, which it returns. A handler's
// error closes the connection.
func (st *nativeStream) receiveEach(handler func(payload []byte) error) error {
	st.mu.Lock()
	var err error
	for _, b := range st.queue {
		if err == nil {
			err = handler(b)
		}
	}
	st.queue = nil
	st.handler = handler
	st.mu.Unlock()
	if err != nil {
		st.nc.close(err)
	}
	for {
		st.mu.Lock()
		end := st.end
		st.mu.Unlock()
		if end != nil {
			return end
		}
		<-st.signal
	}
}

func (st *nativeStream) poke() {
	select {
	case st.signal <- struct{}{}:
	default:
	}
}

// finish ends the stream with err, unless it ended already.
func (st *nativeStream) finish(err error) {
	st.mu.Lock()
	if st.end == nil {
		st.end = err
	}
	st.mu.Unlock()
	st.poke()
}

func (st *nativeStream) send(m proto.Message) error {
	st.mu.Lock()
	end, closed := st.end, st.sendClosed
	st.mu.Unlock()
	switch {
	case end != nil:
		return end
	case closed:
		return connect.NewError(connect.CodeFailedPrecondition, errors.New("send after CloseRequest"))
	}
	return st.nc.write(st.kind, st, m)
}

func (st *nativeStream) receive(m proto.Message) error {
	for {
		st.mu.Lock()
		if len(st.queue) > 0 {
			b := st.queue[0]
			st.queue[0] = nil
			st.queue = st.queue[1:]
			st.mu.Unlock()
			if err := proto.Unmarshal(b, m); err != nil {
				err = fmt.Errorf("%w: %v", nativewire.ErrMalformed, err)
				st.nc.close(err)
				return connect.NewError(connect.CodeInternal, err)
			}
			return nil
		}
		end := st.end
		st.mu.Unlock()
		if end != nil {
			return end
		}
		<-st.signal
	}
}

// CloseRequest tells the server the client sends no more on the stream.
func (st *nativeStream) CloseRequest() error {
	st.mu.Lock()
	skip := st.sendClosed || st.end != nil
	st.sendClosed = true
	st.mu.Unlock()
	if skip || !st.started() {
		return nil
	}
	return st.nc.write(nativewire.KindCloseSend, st, nil)
}

// CloseResponse abandons the stream: the server cancels it (as it cancels
// a Connect stream whose client went away) and Receive returns at once.
func (st *nativeStream) CloseResponse() error {
	st.mu.Lock()
	ended := st.end != nil
	if !ended {
		st.end = connect.NewError(connect.CodeCanceled, errors.New("stream closed by the client"))
	}
	st.mu.Unlock()
	st.poke()
	if ended || !st.started() {
		return nil
	}
	st.nc.mu.Lock()
	if st.nc.streams != nil {
		delete(st.nc.streams, st.id)
	}
	st.nc.mu.Unlock()
	return st.nc.write(nativewire.KindCancel, st, nil)
}

// started reports whether the stream sent its first frame (has an id).
func (st *nativeStream) started() bool {
	st.nc.mu.Lock()
	defer st.nc.mu.Unlock()
	return st.id != 0
}

// abortConn closes the stream's connection when nothing at all arrived on
// it since since: the stream went silent, and a silent connection (a
// partition) must not be reused. A connection that still brings frames
// (the other stream's answers) is not silent: the stream alone is given
// up (its caller fails it) and reopened on the same connection.
func (st *nativeStream) abortConn(err error, since time.Time) {
	if st.nc.lastRecv.Load() < since.UnixNano() {
		st.nc.close(err)
	}
}

type nativePipeline struct{ *nativeStream }

func (s nativePipeline) Send(m *fencedv1.PipelineRequest) error { return s.send(m) }

func (s nativePipeline) Receive() (*fencedv1.PipelineResponse, error) {
	m := new(fencedv1.PipelineResponse)
	if err := s.receive(m); err != nil {
		return nil, err
	}
	return m, nil
}

// receiveEach calls f with each response as the connection's reader
// decodes it, without a hand-off to a receiving goroutine, until the
// stream ends; it returns the stream's end. f must not block.
//
// The response is decoded into one message reused for every frame (the
// handler runs in the reader alone), its results' slice too: f keeps the
// results it hands out, never the response or the slice.
func (s nativePipeline) receiveEach(f func(*fencedv1.PipelineResponse)) error {
	m := new(fencedv1.PipelineResponse)
	decode := proto.UnmarshalOptions{Merge: true} // into the emptied m
	return s.nativeStream.receiveEach(func(b []byte) error {
		results := m.Results
		clear(results)
		m.Reset()
		m.Results = results[:0]
		if err := decode.Unmarshal(b, m); err != nil {
			return fmt.Errorf("%w: %v", nativewire.ErrMalformed, err)
		}
		f(m)
		return nil
	})
}

// direct reports that a send writes to the connection at once, without
// blocking for long (nativeConn.write's deadline): a caller may send its
// own call (pipeStream.flush).
func (s nativePipeline) direct() bool { return true }

type nativeKeepAlive struct{ *nativeStream }

func (s nativeKeepAlive) Send(m *fencedv1.KeepAliveRequest) error { return s.send(m) }

func (s nativeKeepAlive) Receive() (*fencedv1.KeepAliveResponse, error) {
	m := new(fencedv1.KeepAliveResponse)
	if err := s.receive(m); err != nil {
		return nil, err
	}
	return m, nil
}
