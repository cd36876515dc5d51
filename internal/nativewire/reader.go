package nativewire

import (
	"bufio"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Reader reads the frames of one connection and hands each to a function,
// in order (Run).
//
// On a plain TCP connection (one that is, or wraps without changing its
// bytes, a syscall.Conn) it reads the socket itself, inside one
// syscall.RawConn.Read: a read that fills less than the buffer found the
// socket empty, so the Reader hands over the frames it holds and then
// waits for the poller without another read. A net.Conn's Read (and a
// bufio.Reader's) would try the read again first and get EAGAIN: one
// system call per message that finds nothing, about a quarter of a
// native connection's system calls when each call waits for its answer.
// Over TLS, or any connection that is not a syscall.Conn, it reads through
// a bufio.Reader.
type Reader struct {
	c          net.Conn
	r          *bufio.Reader   // read first: bytes buffered before the Reader took over
	raw        syscall.RawConn // nil: read through r
	maxPayload int
	// buf[start:end] holds the bytes read and not yet handed over: whole
	// frames, then at most the beginning of one.
	buf        []byte
	start, end int

	// ProbeInterval bounds how late a Reader of the socket sees the
	// peer's end (or a reset) that arrived together with its last frame
	// (runRaw); DefaultProbeInterval unless set before Run.
	ProbeInterval time.Duration

	dmu      sync.Mutex
	deadline time.Time // set with SetReadDeadline
	probeAt  time.Time // the probe's deadline; zero when none is armed
}

// DefaultProbeInterval is a Reader's ProbeInterval by default.
const DefaultProbeInterval = 200 * time.Millisecond

// readerBufferSize is a Reader's buffer, enough for many small frames; a
// larger frame gets a buffer of its own size, dropped once it is handed
// over.
const readerBufferSize = 16 << 10

// NewReader returns a Reader of c's frames whose payloads are at most
// maxPayload bytes. r, if not nil, is a buffer over c that may hold bytes
// already read (the preface's, the handshake's): they are read first, and
// r is not used after them unless c is not a plain TCP connection.
func NewReader(c net.Conn, r *bufio.Reader, maxPayload int) *Reader {
	fr := &Reader{c: c, r: r, ProbeInterval: DefaultProbeInterval, maxPayload: maxPayload, buf: make([]byte, readerBufferSize)}
	if sc, ok := c.(syscall.Conn); ok && rawReads {
		if raw, err := sc.SyscallConn(); err == nil {
			fr.raw = raw
		}
	}
	if fr.r == nil && fr.raw == nil {
		fr.r = bufio.NewReaderSize(c, readerBufferSize)
	}
	return fr
}

// SetReadDeadline sets the connection's read deadline, as
// net.Conn.SetReadDeadline does; set it here, not on the connection,
// whose deadline the Reader's probe shares.
func (fr *Reader) SetReadDeadline(t time.Time) error {
	fr.dmu.Lock()
	defer fr.dmu.Unlock()
	fr.deadline = t
	return fr.applyDeadlineLocked()
}

// applyDeadlineLocked sets the connection's read deadline to the earlier
// of the deadline set and the probe's. Call with dmu held.
func (fr *Reader) applyDeadlineLocked() error {
	d := fr.deadline
	if !fr.probeAt.IsZero() && (d.IsZero() || fr.probeAt.Before(d)) {
		d = fr.probeAt
	}
	return fr.c.SetReadDeadline(d)
}

// Run reads frames and calls handle with each until a read fails (io.EOF
// when the peer closed the connection between frames), a frame breaks the
// framing (ErrMalformed, ErrTooBig) or handle returns an error, and
// returns that error. A frame's payload is valid until handle returns.
func (fr *Reader) Run(handle func(Frame) error) error {
	if fr.raw == nil {
		return fr.runBuffered(handle)
	}
	// The bytes the bufio.Reader holds come first.
	if fr.r != nil {
		if n := fr.r.Buffered(); n > 0 {
			b, _ := fr.r.Peek(n)
			fr.ensure(n)
			fr.end += copy(fr.buf[fr.end:], b)
			_, _ = fr.r.Discard(n)
			if err := fr.handleHeld(handle); err != nil {
				return err
			}
		}
		fr.r = nil
	}
	return fr.runRaw(handle)
}

// runBuffered is Run through the bufio.Reader.
func (fr *Reader) runBuffered(handle func(Frame) error) error {
	for {
		f, err := ReadFrameBuffer(fr.r, fr.maxPayload, fr.buf)
		if err == nil {
			err = handle(f)
		}
		if err != nil {
			return err
		}
	}
}

// received takes n bytes read into buf[end:] (space bytes were free) and
// hands over the whole frames held. It returns whether the read was short
// (the socket had no more) and handle's or the framing's error.
func (fr *Reader) received(n, space int, handle func(Frame) error) (drained bool, err error) {
	fr.end += n
	return n < space, fr.handleHeld(handle)
}

// handleHeld hands over every whole frame in buf, then keeps the rest
// (the beginning of a frame) at the buffer's start, in a buffer large
// enough for that frame.
func (fr *Reader) handleHeld(handle func(Frame) error) error {
	for fr.end-fr.start >= HeaderLen {
		f, n, err := ParseHeader(fr.buf[fr.start:fr.end], fr.maxPayload)
		if err != nil {
			return err
		}
		size := HeaderLen + n
		if fr.end-fr.start < size {
			fr.ensure(size - (fr.end - fr.start))
			return nil
		}
		if n > 0 {
			f.Payload = fr.buf[fr.start+HeaderLen : fr.start+size : fr.start+size]
		}
		fr.start += size
		if err := handle(f); err != nil {
			return err
		}
	}
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
		if len(fr.buf) > readerBufferSize {
			fr.buf = make([]byte, readerBufferSize)
		}
	}
	fr.ensure(1)
	return nil
}

// ensure makes room for n more bytes after buf[end], moving the held
// bytes to the buffer's start (and to a larger buffer when they and n do
// not fit in this one).
func (fr *Reader) ensure(n int) {
	if len(fr.buf)-fr.end >= n {
		return
	}
	held := fr.end - fr.start
	if held+n > len(fr.buf) {
		nb := make([]byte, max(held+n, readerBufferSize))
		copy(nb, fr.buf[fr.start:fr.end])
		fr.buf = nb
	} else {
		copy(fr.buf, fr.buf[fr.start:fr.end])
	}
	fr.start, fr.end = 0, held
}

// opError wraps the error of a read on the socket as net.Conn's Read
// would.
func (fr *Reader) opError(err error) error {
	return &net.OpError{Op: "read", Net: fr.c.LocalAddr().Network(), Source: fr.c.LocalAddr(), Addr: fr.c.RemoteAddr(), Err: err}
}

// eof is the error of a read that found the connection closed: io.EOF
// between frames, io.ErrUnexpectedEOF inside one.
func (fr *Reader) eof() error {
	if fr.end > fr.start {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}
