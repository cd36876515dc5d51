package server

import (
	"bufio"
	"fmt"
	"net"
	"syscall"
)

// readBufferSize is the read buffer of a cleartext API connection: a few
// HTTP/2 frames of a pipelined call each.
const readBufferSize = 4 << 10

// readBufListener buffers the reads of the cleartext connections it
// accepts. net/http's HTTP/2 server reads each frame from the connection
// in two reads of its own (the 9-byte header, then the payload), so
// without a buffer every message a client sends costs the server two
// read system calls; with one, every frame that has arrived by the time
// of the read is taken in one. TLS connections need none: crypto/tls
// reads whole records into a buffer of its own.
type readBufListener struct {
	net.Listener
}

// Accept implements net.Listener.
func (l readBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readBufConn{Conn: c, r: bufio.NewReaderSize(c, readBufferSize)}, nil
}

// readBufConn is a connection whose reads go through a buffer; everything
// else (writes, deadlines, Close) is the connection's own.
type readBufConn struct {
	net.Conn
	r *bufio.Reader
}

// Read implements net.Conn: a read the buffer holds bytes for returns
// them without a system call; a read of the buffer's size or more on an
// empty buffer goes straight to the connection.
func (c *readBufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// SyscallConn returns the raw connection under the buffer, for a reader
// that first takes the buffer's bytes (nativewire.Reader).
func (c *readBufConn) SyscallConn() (syscall.RawConn, error) { return syscallConn(c.Conn) }

// syscallConn returns c's raw connection, an error when it has none.
func syscallConn(c net.Conn) (syscall.RawConn, error) {
	if sc, ok := c.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, fmt.Errorf("a %T has no raw connection", c)
}
