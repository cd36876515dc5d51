package client_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
	"github.com/fenced-dev/fenced/raftstore"
	"github.com/fenced-dev/fenced/server"
)

// startTLSServer starts a single-node server whose API has TLS and returns
// it with the CA file its certificate verifies against.
func startTLSServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := tlsfiles.InitCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	cert, key, err := tlsfiles.Issue(dir, tlsfiles.Node, "n1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, tlsfiles.CACertFile)
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.Raft.PeerListen, cfg.Raft.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	cfg.TLS = raftstore.TLSFiles{Cert: cert, Key: key, CA: ca}
	srv, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv, ca
}

// WithTLS talks HTTP/2 over TLS to host:port endpoints: sessions (their
// keep-alive stream) and locks work; a client that does not trust the CA
// gets nothing.
func TestWithTLS(t *testing.T) {
	srv, ca := startTLSServer(t)
	tc, err := client.LoadTLS(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New([]string{srv.Addr()}, client.WithTLS(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, client.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(s, "tls")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Held past its TTL: the keep-alive stream renews it over TLS.
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-s.Done():
		t.Fatal("session lost: keep-alives over TLS did not renew it")
	default:
	}

	refused := func(what string, opts ...client.Option) {
		t.Helper()
		c, err := client.New([]string{srv.Addr()}, append(opts, client.WithRequestTimeout(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := c.NewSession(short); err == nil {
			t.Fatalf("%s opened a session", what)
		}
	}
	refused("a client without the CA", client.WithTLS(&tls.Config{}))
	refused("a cleartext client")
}

func TestLoadTLS_BadInput(t *testing.T) {
	if _, err := client.LoadTLS("/nonexistent/ca.crt", "", ""); err == nil {
		t.Error("missing CA file accepted")
	}
	if _, err := client.LoadTLS("", "a.crt", ""); err == nil {
		t.Error("certificate without key accepted")
	}
}
