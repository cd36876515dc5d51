package client_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// liveSessions reads fenced_sessions from the server's /metrics.
func liveSessions(t *testing.T, addr string) string {
	t.Helper()
	return testserver.Metric(t, addr, "fenced_sessions")
}

// Close asks the server to close every session of the Client, but with a
// bounded number of calls at once (a Client with many sessions used to
// start a goroutine for each, all retrying against a server that was
// gone), and within one request timeout when the server does not answer.
func TestClient_CloseClosesManySessionsBounded(t *testing.T) {
	srv := testserver.Start(t)
	const n = 150
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		newSession(t, c)
	}
	if got := liveSessions(t, srv.Addr()); got != "150" {
		t.Fatalf("fenced_sessions %s before Close, want %d", got, n)
	}
	c.Close()
	if got := liveSessions(t, srv.Addr()); got != "0" {
		t.Fatalf("fenced_sessions %s after Close, want every session closed", got)
	}

	// The server unreachable: Close spends one request timeout, with a
	// bounded number of goroutines.
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c2, err := client.New([]string{p.Addr()}, client.WithRequestTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		newSession(t, c2, client.WithTTL(time.Minute))
	}
	p.SetMode(faultproxy.Blackhole)
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if g := int64(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	start := time.Now()
	c2.Close()
	took := time.Since(start)
	close(stop)
	<-sampled
	if took > 10*time.Second {
		t.Errorf("Close with the server unreachable took %v, want about the request timeout (1s)", took)
	}
	if extra := peak.Load() - int64(base); extra > 100 {
		t.Errorf("Close ran %d goroutines more than before it for %d sessions, want at most about 32", extra, n)
	}
}
