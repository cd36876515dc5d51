package pggrant_test

import (
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grantortest"
	"github.com/fenced-dev/fenced/pggrant"
)

// The PostgreSQL grantor passes the grantor conformance suite, with a
// fallback re-check of 30s (so a polling waiter would fail the handoff
// test) and PostgreSQL restarted (immediate shutdown) in the middle.
func TestGrantor_Conformance(t *testing.T) {
	const recheck = 30 * time.Second
	grantortest.Run(t, grantortest.Store{
		Addr: pgAddr(),
		Open: func(t *testing.T, addr string) fence.Grantor {
			return open(t, addr, pggrant.WithRecheck(recheck))
		},
		Restart: func(t *testing.T) {
			if err := pg.Restart(); err != nil {
				t.Fatal(err)
			}
		},
		Recheck:     recheck,
		PostgresURL: pg.URL,
	})
}
