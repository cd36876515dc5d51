package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// countingBody is a request body that counts its reads and, once its
// bytes are out, blocks until it is closed, as a stream's body does
// while the client sends nothing.
type countingBody struct {
	data   *bytes.Reader
	reads  int
	closed chan struct{}
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads++
	if b.data.Len() == 0 {
		<-b.closed
		return 0, io.EOF
	}
	return b.data.Read(p)
}

func (b *countingBody) Close() error { return nil }

// A streaming call's messages, read as Connect reads them (a 5-byte
// prefix, then the message), cost one read of the body for all those that
// have arrived instead of two each; and a read returns what has arrived
// without waiting for the buffer to fill (the body then blocks). Other
// paths keep their body as it is.
func TestBufferStreamBodies(t *testing.T) {
	var msgs []byte
	for i := 0; i < 10; i++ {
		msgs = append(msgs, 0, 0, 0, 0, 20)
		msgs = append(msgs, bytes.Repeat([]byte{byte(i)}, 20)...)
	}
	for path, wantBuffered := range map[string]bool{
		fencedv1connect.LockServicePipelineProcedure:     true,
		fencedv1connect.SessionServiceKeepAliveProcedure: true,
		fencedv1connect.LockServiceAcquireProcedure:      false,
	} {
		body := &countingBody{data: bytes.NewReader(msgs), closed: make(chan struct{})}
		done := make(chan int)
		h := bufferStreamBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := r.Body.(*bufferedBody); ok != wantBuffered {
				t.Errorf("%s: body buffered %v, want %v", path, ok, wantBuffered)
			}
			var prefix [5]byte
			msg := make([]byte, 20)
			n := 0
			for ; n < 10; n++ {
				if _, err := io.ReadFull(r.Body, prefix[:]); err != nil {
					break
				}
				if _, err := io.ReadFull(r.Body, msg); err != nil || msg[0] != byte(n) {
					t.Errorf("%s: message %d: %v %v", path, n, msg, err)
					break
				}
			}
			done <- n
		}))
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.Body = body
		go h.ServeHTTP(httptest.NewRecorder(), r)
		select {
		case n := <-done:
			if n != 10 {
				t.Fatalf("%s: read %d messages, want 10", path, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the messages that arrived were not returned: the read waits for more", path)
		}
		close(body.closed)
		if wantBuffered && body.reads > 2 {
			t.Errorf("%s: %d reads of the body for 10 messages that arrived together, want 1", path, body.reads)
		}
		if !wantBuffered && body.reads < 20 {
			t.Errorf("%s: %d reads of an unbuffered body, want 20", path, body.reads)
		}
	}
}
