package server

import (
	"bufio"
	"io"
	"net/http"
)

// streamBodyBufferSize is the read buffer of a streaming call's request
// body: several Pipeline or KeepAlive messages.
const streamBodyBufferSize = 4 << 10

// bufferStreamBodies reads the request bodies of the streaming calls
// (Pipeline, KeepAlive) through a buffer. Connect reads every message in
// two reads, its 5-byte envelope prefix and then the message, and over
// HTTP/2 each read of a request body is a round trip to the connection's
// serving goroutine (it accounts the bytes for flow control); with the
// buffer, one read takes the prefix and the message together, and the
// messages that arrived with it. A read returns what has arrived; it
// never waits to fill the buffer, so a stream's messages are not delayed.
func bufferStreamBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if clientStreamPaths[r.URL.Path] && r.Body != nil && r.Body != http.NoBody {
			r.Body = &bufferedBody{Reader: bufio.NewReaderSize(r.Body, streamBodyBufferSize), body: r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

// bufferedBody is a request body read through a buffer; closing it closes
// the body.
type bufferedBody struct {
	*bufio.Reader
	body io.Closer
}

// Close implements io.Closer.
func (b *bufferedBody) Close() error { return b.body.Close() }
