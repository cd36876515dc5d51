package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/internal/nativewire"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// The native protocol (docs/design.md, "The native protocol"): the Go
// SDK's Pipeline and KeepAlive streams as length-prefixed frames over one
// connection to the API port (internal/nativewire), without HTTP/2 and
// Connect in between. nativeListener picks the connections that speak it
// (a preface in cleartext, ALPN over TLS); serveNative authenticates a
// connection as the HTTP path authenticates a call, refuses it on a
// follower (naming the leader), and runs each stream through the same
// handler as its Connect stream (lockService.pipeline,
// sessionService.keepAlive), behind the bidiStream interface.
//
// A Pipeline stream has no goroutine of its own: the connection's reader
// decodes each message and starts its calls (pipeline.handle), which does
// not block, so a call costs no hand-off between the reader and a
// receiving goroutine; in the profile of 64 independent clients that
// hand-off and the frame's allocations were about 8 % of the server's CPU.
// A KeepAlive stream runs its handler on a goroutine, fed by a channel.

// nativeProcedure names native connections in the audit log.
const nativeProcedure = "fenced/1"

// nativeHandshakeTimeout bounds the preface, the TLS handshake and the
// hello when Limits.ReadHeaderTimeout is 0.
const nativeHandshakeTimeout = 10 * time.Second

// maxNativeHelloBytes bounds the hello, read before authentication (a
// bearer token is 64 bytes; net/http allows headers of 1 MiB).
const maxNativeHelloBytes = 64 << 10

// nativeStreamBuffer is how many frames of a KeepAlive stream the
// connection's reader queues before it waits for the stream's handler.
const nativeStreamBuffer = 16

// maxNativeWriteBuffer is the largest write buffer a native connection
// keeps for its next frames.
const maxNativeWriteBuffer = 64 << 10

// nativeMaxFrameBytes is the largest payload of a native frame: the
// limit, or by default what a Connect Pipeline message may be.
func (s *Server) nativeMaxFrameBytes() int {
	if n := s.cfg.Limits.NativeMaxFrameBytes; n > 0 {
		return n
	}
	return max(s.cfg.MaxMessageBytes, fsm.MaxValueBytes+s.cfg.MaxMessageBytes)
}

// refuseNative answers a native connection's handshake with an error and
// closes it.
func (s *Server) refuseNative(c net.Conn, code connect.Code, msg, leader string) {
	defer c.Close()
	if b, err := nativewire.AppendFrame(nil, nativewire.KindWelcome, 0, &fencedv1.NativeWelcome{Code: uint32(code), Message: msg, Leader: leader}); err == nil {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(b)
	}
	s.log.Debug("native connection refused", "remote", c.RemoteAddr().String(), "code", code.String(), "err", msg)
}

// serveNative serves one native connection whose preface (or ALPN) is
// done: the hello, due by deadline, then its streams until it closes.
func (s *Server) serveNative(c net.Conn, r *bufio.Reader, state *tls.ConnectionState, deadline time.Time) {
	_ = c.SetReadDeadline(deadline)
	max := s.nativeMaxFrameBytes()
	// Before authentication a frame is held to what a hello needs.
	f, err := nativewire.ReadFrame(r, min(max, maxNativeHelloBytes))
	if err != nil || f.Kind != nativewire.KindHello {
		if err == nil {
			err = fmt.Errorf("%w: the first frame is of kind %d, not a hello (%d)", nativewire.ErrMalformed, f.Kind, nativewire.KindHello)
		}
		s.refuseNative(c, connect.CodeInvalidArgument, "native hello: "+err.Error(), "")
		return
	}
	var hello fencedv1.NativeHello
	if err := proto.Unmarshal(f.Payload, &hello); err != nil {
		s.refuseNative(c, connect.CodeInvalidArgument, "native hello: "+err.Error(), "")
		return
	}
	if hello.Version != nativewire.Version {
		s.refuseNative(c, connect.CodeInvalidArgument, fmt.Sprintf("native protocol version %d; this server speaks %d", hello.Version, nativewire.Version), "")
		return
	}
	// Authenticated as an HTTP call with the hello's Authorization and the
	// connection's TLS state: no member may forward a client identity here
	// (no X-Fenced-Client-Identity), and the source is the peer's address.
	ctx := s.withIdentity(s.ctx, sourceOf(c.RemoteAddr().String()))
	if s.auth != nil {
		req := (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: nativeProcedure}, Header: http.Header{}, RemoteAddr: c.RemoteAddr().String(), TLS: state}).WithContext(ctx)
		if hello.Authorization != "" {
			req.Header.Set("Authorization", hello.Authorization)
		}
		caller, err := s.authenticateRequest(req)
		if err != nil {
			s.refuseNative(c, connect.CodeUnauthenticated, err.Error(), "")
			return
		}
		ctx = context.WithValue(ctx, callerKey{}, caller)
	}
	if !s.node.IsLeader() {
		leader := ""
		if u := s.leaderURL(); u != nil {
			leader = u.Host
		}
		s.refuseNative(c, connect.CodeUnavailable, "node "+s.cfg.Raft.NodeID+" is not the leader; use Connect, which it forwards, or the leader", leader)
		return
	}
	nc := &nativeConn{s: s, c: c, reader: nativewire.NewReader(c, r, max), streams: make(map[uint32]*nativeStream), writeTimeout: s.cfg.Limits.PingTimeout}
	nc.wdone.L = &nc.wmu
	nc.ctx, nc.cancel = context.WithCancel(ctx)
	if !s.natives.add(nc) {
		c.Close()
		return
	}
	defer s.natives.remove(nc)
	if err := nc.write(nativewire.KindWelcome, 0, &fencedv1.NativeWelcome{}); err != nil {
		nc.close()
		return
	}
	_ = nc.reader.SetReadDeadline(time.Time{})
	nc.serve()
}

// nativeConn is one native connection past its handshake.
type nativeConn struct {
	s *Server
	c net.Conn
	// reader reads the frames; the read deadline is set through it, as
	// its probe shares the connection's.
	reader *nativewire.Reader
	// writeTimeout bounds a write (Limits.PingTimeout): a peer that does
	// not read is cut off.
	writeTimeout time.Duration
	ctx          context.Context // the caller's; cancelled when the connection ends
	cancel       context.CancelFunc
	handlers     sync.WaitGroup

	// The connection's writes (write): frames queue in wbuf while a
	// writer is in its system call, and that writer sends them all in its
	// next one.
	wmu     sync.Mutex
	wdone   sync.Cond // signalled, with wmu, when a writer stops (flushWait)
	wbuf    []byte    // frames to write
	wspare  []byte    // the buffer of the last write, reused for wbuf
	writing bool      // a goroutine is writing wbuf's frames
	// wdeadline bounds the writes; used by the writing goroutine alone.
	wdeadline nativewire.WriteDeadline
	werr      error

	mu      sync.Mutex
	streams map[uint32]*nativeStream // open streams by id
	lastID  uint32                   // highest stream id opened
	// idleArmed is set while the read deadline of --idle-timeout is set.
	idleArmed bool
}

// serve reads frames until the connection ends or breaks the protocol,
// then cancels its streams and closes it.
func (nc *nativeConn) serve() {
	defer nc.close()
	nc.armIdle()
	err := nc.reader.Run(func(f nativewire.Frame) error {
		if err := nc.dispatch(f); err != nil {
			return err
		}
		nc.armIdle()
		return nil
	})
	if errors.Is(err, nativewire.ErrMalformed) || errors.Is(err, nativewire.ErrTooBig) {
		nc.fail(err)
	}
}

// armIdle is armIdleLocked with nc.mu.
func (nc *nativeConn) armIdle() {
	nc.mu.Lock()
	nc.armIdleLocked()
	nc.mu.Unlock()
}

// armIdleLocked closes the connection after --idle-timeout without a
// stream, as net/http closes an HTTP connection without a request: it
// sets the read deadline when the last stream ended or before a read
// with none open, and clears it once a stream is open. Call with nc.mu
// held.
func (nc *nativeConn) armIdleLocked() {
	idle := nc.s.cfg.Limits.IdleTimeout
	switch {
	case idle <= 0:
	case len(nc.streams) == 0:
		_ = nc.reader.SetReadDeadline(time.Now().Add(idle))
		nc.idleArmed = true
	case nc.idleArmed:
		_ = nc.reader.SetReadDeadline(time.Time{})
		nc.idleArmed = false
	}
}

// fail ends the connection for a protocol error, telling the client why
// on stream 0; serve, whose read the close ends, waits for the handlers.
func (nc *nativeConn) fail(err error) {
	nc.s.log.Info("native connection closed", "remote", nc.c.RemoteAddr().String(), "err", err)
	_ = nc.write(nativewire.KindEnd, 0, &fencedv1.PipelineError{Code: uint32(connect.CodeInvalidArgument), Message: err.Error()})
	nc.flushWait()
	nc.cancel()
	nc.c.Close()
}

// close cancels every stream, closes the connection and waits for the
// streams' handlers. Only the reader (serve) calls it once streams may
// be open.
func (nc *nativeConn) close() {
	nc.cancel()
	nc.c.Close()
	nc.mu.Lock()
	var open []*nativeStream
	for _, st := range nc.streams {
		if st.pipe != nil && !st.ended {
			open = append(open, st)
		}
	}
	nc.mu.Unlock()
	for _, st := range open {
		nc.endPipeline(st, connect.NewError(connect.CodeCanceled, st.ctx.Err()))
	}
	nc.handlers.Wait()
}

// dispatch handles one frame from the client.
func (nc *nativeConn) dispatch(f nativewire.Frame) error {
	switch f.Kind {
	case nativewire.KindPipeline, nativewire.KindKeepAlive:
		nc.mu.Lock()
		st := nc.streams[f.Stream]
		isNew := st == nil && f.Stream > nc.lastID
		if isNew {
			nc.lastID = f.Stream
		}
		nc.mu.Unlock()
		switch {
		case isNew:
			if st = nc.open(f.Kind, f.Stream); st == nil {
				return nil
			}
		case st == nil:
			return nil // a stream that ended: its late frames are dropped
		case st.kind != f.Kind:
			return fmt.Errorf("%w: a frame of kind %d on stream %d, which is of kind %d", nativewire.ErrMalformed, f.Kind, f.Stream, st.kind)
		}
		if st.sendClosed {
			return fmt.Errorf("%w: a frame on stream %d after the client closed its side", nativewire.ErrMalformed, f.Stream)
		}
		if st.pipe != nil {
			return nc.handlePipeline(st, f.Payload)
		}
		select {
		case st.in <- bytes.Clone(f.Payload): // f.Payload is the reader's buffer
		case <-st.ctx.Done():
		}
	case nativewire.KindCloseSend, nativewire.KindCancel:
		nc.mu.Lock()
		st := nc.streams[f.Stream]
		nc.mu.Unlock()
		switch {
		case st == nil:
		case f.Kind == nativewire.KindCancel:
			st.cancel()
			if st.pipe != nil {
				nc.endPipeline(st, connect.NewError(connect.CodeCanceled, st.ctx.Err()))
			}
		case !st.sendClosed:
			st.sendClosed = true
			if st.pipe != nil {
				nc.endPipeline(st, nil)
			} else {
				close(st.in)
			}
		}
	default:
		return fmt.Errorf("%w: a client sends no frame of kind %d after its hello", nativewire.ErrMalformed, f.Kind)
	}
	return nil
}

// open starts the handler of a new stream, or refuses it with an end
// frame (nil): over the streams a connection may have, or this node is no
// longer the leader.
func (nc *nativeConn) open(kind nativewire.Kind, id uint32) *nativeStream {
	s := nc.s
	nc.mu.Lock()
	n := len(nc.streams)
	nc.mu.Unlock()
	var refusal error
	switch {
	case s.cfg.Limits.NativeMaxStreams > 0 && n >= s.cfg.Limits.NativeMaxStreams:
		refusal = connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d streams open on this native connection, the most it may have (--native-max-streams)", n))
	case !s.node.IsLeader():
		refusal = connect.NewError(connect.CodeUnavailable, fmt.Errorf("node %s is no longer the leader; reconnect", s.cfg.Raft.NodeID))
	}
	if refusal != nil {
		_ = nc.write(nativewire.KindEnd, id, streamEnd(refusal))
		return nil
	}
	st := &nativeStream{nc: nc, id: id, kind: kind}
	st.ctx, st.cancel = context.WithCancel(nc.ctx)
	if kind == nativewire.KindPipeline {
		st.pipe = (&lockService{s}).newPipeline(st.ctx, nativePipeline{st})
		// A failed send means the connection's writer failed: the
		// connection ends, and with it this stream.
		_ = st.pipe.announce()
	} else {
		st.in = make(chan []byte, nativeStreamBuffer)
	}
	nc.mu.Lock()
	nc.streams[id] = st
	nc.mu.Unlock()
	if st.pipe != nil {
		return st
	}
	nc.handlers.Add(1)
	go func() {
		defer nc.handlers.Done()
		err := s.authorize(st.ctx, fencedv1connect.SessionServiceKeepAliveProcedure, needOf(&fencedv1.KeepAliveRequest{}))
		if err == nil {
			err = (&sessionService{s}).keepAlive(st.ctx, nativeKeepAlive{st})
		}
		nc.endStream(st, err)
	}()
	return st
}

// handlePipeline decodes one message of a Pipeline stream from payload
// (the reader's buffer, free again once it returns) and starts its calls.
// A message that does not decode ends the connection; a stream whose
// Send failed, or that was cancelled, takes no more.
func (nc *nativeConn) handlePipeline(st *nativeStream, payload []byte) error {
	if st.ended || st.ctx.Err() != nil {
		return nil
	}
	req := new(fencedv1.PipelineRequest)
	if err := proto.Unmarshal(payload, req); err != nil {
		return fmt.Errorf("%w: stream %d: %v", nativewire.ErrMalformed, st.id, err)
	}
	if !st.pipe.handle(req) {
		nc.endPipeline(st, nil)
	}
	return nil
}

// endPipeline ends a Pipeline stream that takes no more messages, the
// client's side closed (recvErr nil) or not: on a goroutine of its own it
// waits for the stream's calls (pipeline.finish), then sends the end.
// Called by the reader only, once per stream.
func (nc *nativeConn) endPipeline(st *nativeStream, recvErr error) {
	if st.ended {
		return
	}
	st.ended = true
	nc.handlers.Add(1)
	go func() {
		defer nc.handlers.Done()
		nc.endStream(st, st.pipe.finish(recvErr))
	}()
}

// endStream forgets a stream whose handler returned err and sends its
// end frame.
func (nc *nativeConn) endStream(st *nativeStream, err error) {
	st.cancel()
	nc.mu.Lock()
	delete(nc.streams, st.id)
	nc.armIdleLocked()
	nc.mu.Unlock()
	_ = nc.write(nativewire.KindEnd, st.id, streamEnd(err))
}

// streamEnd is the end frame's message of a stream whose handler
// returned err: the code and message a Connect stream would end with.
func streamEnd(err error) *fencedv1.PipelineError {
	if err == nil {
		return &fencedv1.PipelineError{}
	}
	return pipelineError(0, err).GetError()
}

// write sends one frame. Frames written while another goroutine is in
// the connection's write system call wait in a buffer, and that
// goroutine sends them together in its next one, until none is left: the
// answers of several calls (or streams) ready at once cost one write, and
// a lone answer is written at once by its own goroutine, without a
// hand-off to another. A frame queued so returns nil before it is
// written; if that write fails, the connection closes, which ends its
// streams. A failed write closes the connection.
func (nc *nativeConn) write(kind nativewire.Kind, stream uint32, m proto.Message) error {
	nc.wmu.Lock()
	if nc.werr != nil {
		err := nc.werr
		nc.wmu.Unlock()
		return err
	}
	buf, err := nativewire.AppendFrame(nc.wbuf, kind, stream, m)
	nc.wbuf = buf
	if err != nil || nc.writing {
		nc.wmu.Unlock()
		return err
	}
	nc.writing = true
	for {
		out := nc.wbuf
		nc.wbuf = nc.wspare[:0]
		nc.wmu.Unlock()
		_ = nc.wdeadline.Extend(nc.c, nc.writeTimeout)
		_, err := nc.c.Write(out)
		nc.wmu.Lock()
		nc.wspare = nil
		if cap(out) <= maxNativeWriteBuffer {
			nc.wspare = out[:0]
		}
		if err != nil {
			nc.werr, nc.wbuf = err, nil
			nc.c.Close()
		}
		if err != nil || len(nc.wbuf) == 0 {
			nc.writing = false
			nc.wdone.Broadcast()
			nc.wmu.Unlock()
			return err
		}
	}
}

// flushWait waits until the frames written so far are sent (or their
// write failed).
func (nc *nativeConn) flushWait() {
	nc.wmu.Lock()
	for nc.writing {
		nc.wdone.Wait()
	}
	nc.wmu.Unlock()
}

// nativeStream is one stream of a native connection.
type nativeStream struct {
	nc     *nativeConn
	id     uint32
	kind   nativewire.Kind
	ctx    context.Context
	cancel context.CancelFunc
	// pipe is a Pipeline stream's state, its messages handed in by the
	// connection's reader; nil for a KeepAlive stream.
	pipe *pipeline
	// in carries a KeepAlive stream's payloads; closed when the client
	// closes its side.
	in chan []byte
	// sendClosed is set, by the connection's reader only, when the client
	// closed its side. ended is set, by the reader only, once a Pipeline
	// stream takes no more messages (endPipeline).
	sendClosed, ended bool
}

// receive decodes the next message of the stream into m: io.EOF once the
// client closed its side, an error once the stream is cancelled. A
// message that does not decode ends the connection.
func (st *nativeStream) receive(m proto.Message) error {
	select {
	case b, ok := <-st.in:
		if !ok {
			return io.EOF
		}
		if err := proto.Unmarshal(b, m); err != nil {
			err = fmt.Errorf("%w: stream %d: %v", nativewire.ErrMalformed, st.id, err)
			st.nc.fail(err)
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		return nil
	case <-st.ctx.Done():
		return connect.NewError(connect.CodeCanceled, st.ctx.Err())
	}
}

// nativePipeline is a native Pipeline stream. Its messages are handed to
// its pipeline by the connection's reader (handlePipeline); Receive is
// never called.
type nativePipeline struct{ *nativeStream }

func (s nativePipeline) Receive() (*fencedv1.PipelineRequest, error) {
	return nil, errors.New("a native Pipeline stream's messages are handed in by its connection's reader")
}

func (s nativePipeline) Send(m *fencedv1.PipelineResponse) error {
	return s.nc.write(nativewire.KindPipeline, s.id, m)
}

// nativeKeepAlive is a native KeepAlive stream.
type nativeKeepAlive struct{ *nativeStream }

func (s nativeKeepAlive) Receive() (*fencedv1.KeepAliveRequest, error) {
	m := new(fencedv1.KeepAliveRequest)
	if err := s.receive(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (s nativeKeepAlive) Send(m *fencedv1.KeepAliveResponse) error {
	return s.nc.write(nativewire.KindKeepAlive, s.id, m)
}
