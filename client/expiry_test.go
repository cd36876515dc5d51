package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// Twenty grants of one name, each taken after the previous one's TTL ran
// out on the server (a forced expiry, never a release), have strictly
// increasing tokens.
//
// A 200ms TTL keeps the twenty expiries quick, but on a loaded machine the
// answer to an acquire can come after the grant's validity (less its
// margin) ran out: Acquire then reports fence.ErrLockLost and withdraws
// it. Such an acquire hands the test no grant, so it is tried again; every
// grant the test sees still ended by expiry.
func TestAcquire_TokensIncreaseAcrossExpiries(t *testing.T) {
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last fence.Token
	late := 0
	for i := 0; i < 20; i++ {
		var l *client.TTLLock
		for l == nil { // the previous grant is held until the server expires it
			l, err = c.Acquire(ctx, "expiring", 200*time.Millisecond)
			if errors.Is(err, fence.ErrNotGranted) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if errors.Is(err, fence.ErrLockLost) && ctx.Err() == nil {
				late++
				continue // answered after its validity: no grant seen
			}
			if err != nil {
				t.Fatalf("grant %d: %v (%d acquires answered too late before)", i, err, late)
			}
		}
		if l.Token() <= last {
			t.Fatalf("grant %d: Token()=%d, want above %d", i, l.Token(), last)
		}
		last = l.Token()
		<-l.Context().Done() // never released: it expires
	}
}
