package client_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// nativeConns returns the server's fenced_api_native_connections_open.
func nativeConns(t *testing.T, hc *http.Client, base string) int {
	t.Helper()
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fenced_api_native_connections_open "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatalf("%s/metrics has no fenced_api_native_connections_open", base)
	return 0
}

// lockAndRenew takes a lock in a session of a 1s TTL and keeps it past
// the TTL: the pipeline and the keep-alive stream both work.
func lockAndRenew(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := testCtx(t)
	s, err := c.NewSession(ctx, client.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(s, "native")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-s.Done():
		t.Fatal("session lost: its renewals did not arrive")
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// By default the SDK carries both streams on one native connection; with
// ProtocolConnect on none.
func TestNative_UsedByDefaultOneConnection(t *testing.T) {
	srv := testserver.Start(t)
	base := "http://" + srv.Addr()
	c := newClient(t, []string{srv.Addr()}, client.WithProtocol(client.ProtocolAuto))
	lockAndRenew(t, c)
	if n := nativeConns(t, http.DefaultClient, base); n != 1 {
		t.Fatalf("%d native connections for one Client's pipeline and keep-alive stream, want 1", n)
	}
	c.Close()
	eventually(t, "the native connection to close with its Client", func() bool { return nativeConns(t, http.DefaultClient, base) == 0 })
	lockAndRenew(t, newClient(t, []string{srv.Addr()}, client.WithProtocol(client.ProtocolConnect)))
	if n := nativeConns(t, http.DefaultClient, base); n != 0 {
		t.Fatalf("%d native connections with ProtocolConnect, want 0", n)
	}
}

// A server without the native protocol (--native=false, or an older one)
// and a proxy that speaks only HTTP: ProtocolAuto falls back to Connect;
// ProtocolNative fails the calls with Unavailable and says why.
func TestNative_FallsBackToConnect(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.DisableNative = true })
	lockAndRenew(t, newClient(t, []string{srv.Addr()}, client.WithProtocol(client.ProtocolAuto)))
	proxied := testserver.Start(t)
	proxy := startNamingProxy(t, proxied.Addr(), "")
	lockAndRenew(t, newClient(t, []string{proxy.addr}, client.WithProtocol(client.ProtocolAuto)))
	if n := nativeConns(t, http.DefaultClient, "http://"+proxied.Addr()); n != 0 {
		t.Fatalf("%d native connections through an HTTP proxy", n)
	}

	var mu sync.Mutex
	var retried []string
	hooks := client.Hooks{Retry: func(op, endpoint string, attempt int, err error) {
		mu.Lock()
		defer mu.Unlock()
		retried = append(retried, err.Error())
	}}
	c := newClient(t, []string{srv.Addr()}, client.WithProtocol(client.ProtocolNative), client.WithRequestTimeout(time.Second), client.WithHooks(hooks))
	ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err) // unary: Connect
	}
	err = client.NewMutex(s, "x").TryLock(ctx)
	mu.Lock()
	defer mu.Unlock()
	if err == nil || len(retried) == 0 || !strings.Contains(retried[0], "does not offer the native protocol") || !strings.Contains(retried[0], "unavailable") {
		t.Fatalf("TryLock with ProtocolNative on a server without it: %v after retries %q, want unavailable failures naming the missing protocol", err, retried)
	}
	if _, err := client.ParseProtocol("h3"); err == nil {
		t.Fatal(`ParseProtocol("h3") succeeded`)
	}
	if _, err := client.New([]string{srv.Addr()}, client.WithProtocol(client.Protocol(9))); err == nil {
		t.Fatal("New took Protocol(9)")
	}
}

// Over TLS the native protocol is chosen by ALPN.
func TestNative_OverTLS(t *testing.T) {
	srv, ca := startTLSServer(t)
	tc, err := client.LoadTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	lockAndRenew(t, newClient(t, []string{srv.Addr()}, client.WithTLS(tc), client.WithProtocol(client.ProtocolNative)))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.Clone()}}
	if n := nativeConns(t, hc, "https://"+srv.Addr()); n != 1 {
		t.Fatalf("%d native connections over TLS, want 1", n)
	}
}
