package client

import (
	"errors"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/testserver"
)

// A Close that starts while a native connection is being dialed (after
// the handshake, before its goroutines start) ends that connection and the
// dial returns ErrClosed; it does not hang on the endpoint's lock, which
// the dialing caller holds (a suite run hung there for 25 minutes).
func TestNativeConn_CloseDuringDialDoesNotHang(t *testing.T) {
	srv := testserver.Start(t)
	c, err := New([]string{srv.Addr()}, WithProtocol(ProtocolNative))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// What Close does before it waits: goRun refuses from here on, while
	// the Client's context is still live so the dial and handshake go on.
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := c.nativeConn(c.endpoints[0])
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("nativeConn during Close = %v, want ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("nativeConn hung while the Client was closing")
	}
}
