package client_test

import (
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/grantortest"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// The server's SDK passes the grantor conformance suite against a real
// `fenced serve` process, killed with SIGKILL and started again on its
// data dir in the middle.
func TestGrantor_Conformance(t *testing.T) {
	srv := proctest.StartServer(t)
	grantortest.Run(t, grantortest.Store{
		Addr: srv.Addr,
		Open: func(t *testing.T, addr string) fence.Grantor {
			return client.NewGrantor(newClient(t, []string{addr}, client.WithRequestTimeout(time.Second)))
		},
		Restart: func(t *testing.T) {
			srv.Kill()
			srv.Start()
		},
	})
}
