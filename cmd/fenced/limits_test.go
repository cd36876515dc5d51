package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// serverClosesWithin reads c until the server closes it and returns how
// long that took, failing the test when it is still open after max.
func serverClosesWithin(t *testing.T, c net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(max))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", max)
	}
	return time.Since(start)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServeLimits_SlowAndIdleConnectionsClosed: an h2c connection left
// idle and a request body dribbled a byte at a time are closed.
func TestServeLimits_SlowAndIdleConnectionsClosed(t *testing.T) {
	srv := proctest.StartServer(t, "--idle-timeout", "300ms", "--body-timeout", "500ms")

	// HTTP/2 with prior knowledge: the preface and an empty SETTINGS frame,
	// then nothing.
	h2 := dial(t, srv.Addr)
	io.WriteString(h2, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	serverClosesWithin(t, h2, 5*time.Second)

	body := `{"name":"` + strings.Repeat("x", 60) + `"}`
	h1 := dial(t, srv.Addr)
	fmt.Fprintf(h1, "POST %s HTTP/1.1\r\nHost: fenced\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", fencedv1connect.LockServiceDescribeProcedure, len(body))
	go func() {
		for i := range len(body) {
			time.Sleep(100 * time.Millisecond)
			if _, err := h1.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	if d := serverClosesWithin(t, h1, 5*time.Second); d < 400*time.Millisecond {
		t.Fatalf("dribbled body cut after %v, before --body-timeout", d)
	}
}

// TestServeLimits_ConnectionsPerSource: connections over the cap are
// closed at once.
func TestServeLimits_ConnectionsPerSource(t *testing.T) {
	srv := proctest.StartServer(t, "--max-conns-per-source", "2")
	http.DefaultClient.CloseIdleConnections() // the readiness polls'
	time.Sleep(100 * time.Millisecond)
	dial(t, srv.Addr)
	dial(t, srv.Addr)
	time.Sleep(100 * time.Millisecond)
	if d := serverClosesWithin(t, dial(t, srv.Addr), 5*time.Second); d > 2*time.Second {
		t.Fatalf("connection over the cap closed after %v, want at once", d)
	}
}

// TestServeLimits_SessionQuota: the third session of a source is refused
// with ResourceExhausted naming the flag.
func TestServeLimits_SessionQuota(t *testing.T) {
	srv := proctest.StartServer(t, "--max-sessions-per-source", "2")
	sessions := fencedv1connect.NewSessionServiceClient(http.DefaultClient, "http://"+srv.Addr)
	ctx := context.Background()
	var err error
	for range 3 {
		if _, err = sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 10000})); err != nil {
			break
		}
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--max-sessions-per-source") {
		t.Fatalf("third session: %v, want ResourceExhausted naming --max-sessions-per-source", err)
	}
}

// TestServeLimits_StatusPaged: Status answers a bounded page with a
// cursor, and `fenced status` follows the pages.
func TestServeLimits_StatusPaged(t *testing.T) {
	srv := proctest.StartServer(t, "--session-rate", "0")
	sessions := fencedv1connect.NewSessionServiceClient(http.DefaultClient, "http://"+srv.Addr)
	ctx := context.Background()
	const n = 1010
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				_, err := sessions.CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 120000}))
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	r, err := locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Msg.Sessions) != 1000 || r.Msg.NextPageToken == "" {
		t.Fatalf("Status: %d sessions, next %q; want a page of 1000 and a cursor", len(r.Msg.Sessions), r.Msg.NextPageToken)
	}
	out, stderr, code := runFenced(t, "status", "--endpoints", srv.Addr)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("sessions (%d)", n)) {
		t.Fatalf("fenced status: exit %d, stderr %s, want %d sessions in:\n%.300s", code, stderr, n, out)
	}
}

func TestServeLimits_BadFlagRefused(t *testing.T) {
	for _, flag := range []string{"--max-conns", "--native-max-frame-bytes", "--native-max-streams"} {
		_, stderr, code := runFenced(t, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0", flag, "-1")
		if code == 0 || !strings.Contains(stderr, flag+" -1 is negative") {
			t.Fatalf("serve %s -1: exit %d, stderr %q; want a refusal naming the flag", flag, code, stderr)
		}
	}
}

// sessionsFrom returns a SessionService client whose connections come
// from the local address ip.
func sessionsFrom(ip, addr string) fencedv1connect.SessionServiceClient {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	return fencedv1connect.NewSessionServiceClient(&http.Client{Transport: tr}, "http://"+addr)
}

// TestServeLimits_ForwardedCallChargedToItsClient: a call a follower
// forwards is charged to the client's source, not to the follower's, and
// a client cannot claim another source by sending the forwarding headers.
func TestServeLimits_ForwardedCallChargedToItsClient(t *testing.T) {
	servers := proctest.StartCluster(t, 3, "--max-sessions-per-source", "1")
	leader, followers := leaderOf(t, servers)
	ctx := context.Background()
	create := func(c fencedv1connect.SessionServiceClient, header map[string]string) error {
		req := connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 60000})
		for k, v := range header {
			req.Header().Set(k, v)
		}
		_, err := c.CreateSession(ctx, req)
		return err
	}
	// 127.0.0.1 (the members' host) uses its one session at the leader.
	if err := create(sessionsFrom("127.0.0.1", leader.Addr), nil); err != nil {
		t.Fatal(err)
	}
	// 127.0.0.2 through a follower: charged to 127.0.0.2, so allowed.
	if err := create(sessionsFrom("127.0.0.2", followers[0].Addr), nil); err != nil {
		t.Fatalf("forwarded create from 127.0.0.2: %v", err)
	}
	// Its second one is over its quota.
	if err := create(sessionsFrom("127.0.0.2", followers[1].Addr), nil); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("second forwarded create from 127.0.0.2: %v, want ResourceExhausted", err)
	}
	// 127.0.0.3 claiming to be a forward of 127.0.0.9 is charged as itself.
	spoof := map[string]string{"X-Fenced-Source": "127.0.0.9", "X-Fenced-Forwarded-By": "n2"}
	if err := create(sessionsFrom("127.0.0.3", leader.Addr), spoof); err != nil {
		t.Fatal(err)
	}
	if err := create(sessionsFrom("127.0.0.3", leader.Addr), spoof); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("second create from 127.0.0.3 claiming another source: %v, want ResourceExhausted", err)
	}
}
