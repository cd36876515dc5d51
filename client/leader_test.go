package client_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// namingProxy is an HTTP/2 cleartext reverse proxy to a real server that,
// like a forwarding follower, names a leader in every response.
type namingProxy struct {
	addr  string
	calls atomic.Int64
}

func startNamingProxy(t *testing.T, target, leader string) *namingProxy {
	t.Helper()
	p := &namingProxy{}
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	u := &url.URL{Scheme: "http", Host: target}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport:     tr,
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			if leader != "" {
				res.Header.Set("Fenced-Leader", leader)
			}
			return nil
		},
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		rp.ServeHTTP(w, r)
	}))
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	p.addr = strings.TrimPrefix(ts.URL, "http://")
	return p
}

// kvGets makes n unary calls through c.
func kvGets(t *testing.T, c *client.Client, n int) {
	t.Helper()
	for range n {
		if _, err := c.KVGet(testCtx(t), "absent"); !errors.Is(err, client.ErrKeyNotFound) {
			t.Fatalf("kv get: %v, want ErrKeyNotFound", err)
		}
	}
}

// A member naming the leader moves the client's calls to the configured
// endpoint with that exact address.
func TestFollowLeader_MovesToConfiguredEndpoint(t *testing.T) {
	srv := testserver.Start(t)
	front := startNamingProxy(t, srv.Addr(), srv.Addr())
	c := newClient(t, []string{front.addr, srv.Addr()})
	kvGets(t, c, 10)
	if n := front.calls.Load(); n != 1 {
		t.Fatalf("the naming member served %d calls, want only the first", n)
	}
}

// A member naming an address the client was not given, or a different
// spelling of a configured one, cannot redirect it: the client stays on the
// endpoint it uses and never dials the named address.
func TestFollowLeader_IgnoresUnconfiguredAddress(t *testing.T) {
	srv := testserver.Start(t)
	evil := startNamingProxy(t, srv.Addr(), "")
	_, port, _ := net.SplitHostPort(srv.Addr())
	for name, tc := range map[string]struct {
		leader    string
		endpoints func(front string) []string
	}{
		"not configured": {evil.addr, func(front string) []string { return []string{front} }},
		"other spelling": {"localhost:" + port, func(front string) []string { return []string{front, srv.Addr()} }},
	} {
		t.Run(name, func(t *testing.T) {
			front := startNamingProxy(t, srv.Addr(), tc.leader)
			c := newClient(t, tc.endpoints(front.addr))
			kvGets(t, c, 10)
			if n := front.calls.Load(); n != 10 {
				t.Fatalf("the naming member served %d of 10 calls, want all", n)
			}
			if n := evil.calls.Load(); n != 0 {
				t.Fatalf("the named address got %d calls, want none", n)
			}
		})
	}
}

// WithFollowLeader(false) keeps the client on its endpoint.
func TestFollowLeader_Off(t *testing.T) {
	srv := testserver.Start(t)
	front := startNamingProxy(t, srv.Addr(), srv.Addr())
	c := newClient(t, []string{front.addr, srv.Addr()}, client.WithFollowLeader(false))
	kvGets(t, c, 10)
	if n := front.calls.Load(); n != 10 {
		t.Fatalf("the naming member served %d of 10 calls, want all", n)
	}
}
