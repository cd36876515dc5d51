package client_test

import (
	"net"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/grantortest"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The server's SDK passes the grantor conformance suite, on a real server
// restarted in the middle (stopped and started again on its data dir).
func TestGrantor_Conformance(t *testing.T) {
	dir, addr, peer := t.TempDir(), freeAddr(t), freeAddr(t)
	fixed := func(c *server.Config) { c.Listen, c.Raft.PeerListen = addr, peer }
	srv, err := testserver.Launch(dir, fixed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	grantortest.Run(t, grantortest.Store{
		Addr: addr,
		Open: func(t *testing.T, addr string) fence.Grantor {
			return client.NewGrantor(newClient(t, []string{addr}, client.WithRequestTimeout(time.Second)))
		},
		Restart: func(t *testing.T) {
			srv.Stop()
			srv, err = testserver.Launch(dir, fixed)
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}
