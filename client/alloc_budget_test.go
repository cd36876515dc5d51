package client_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// Allocation budgets of the SDK's lock cycle: the heap allocations one
// Lock → Token → Unlock of a Mutex makes in the caller's process (the
// calls, their contexts, the grant's context, the frames' encode and the
// answers' decode, on the caller's and the connection's goroutines), the
// server being a real `fenced serve` process of its own so that none of
// its allocations are counted. Counted, not timed, so they hold on a
// loaded machine; under the race detector, whose sync.Pool drops some of
// what is put back, raceAllocs more. Each is the count measured when it
// was set plus about 2: a change that allocates more per cycle fails
// here (docs/contributing.md, "Allocation budgets"), and one that cuts
// allocations lowers its budget so that the cut stays.
//
// Native: 72.0 before the caller sent its own call, the reader decoded the
// answers, an attempt's deadline was the stream's one timer and the
// request and answer channel were reused; 32.0 after, 30.0 once a Mutex
// made its grant's context on first use, 26.0 once the reader decoded
// into one reused response. Connect: 77.1, then 42.1 (the
// same changes but the first two, which are native only), then 40.1.
var sdkAllocBudgets = map[client.Protocol]float64{
	client.ProtocolNative:  28 + raceAllocs,
	client.ProtocolConnect: 42 + raceAllocs,
}

// TestAllocBudget_SDKLockCycle runs lock cycles one after the other on one
// Client, as one of many independent clients does, and counts this
// process's heap allocations per cycle against sdkAllocBudgets.
func TestAllocBudget_SDKLockCycle(t *testing.T) {
	srv := proctest.StartServer(t)
	for p, budget := range sdkAllocBudgets {
		t.Run(p.String(), func(t *testing.T) {
			c, err := client.New([]string{srv.Addr}, client.WithProtocol(p))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			s, err := c.NewSession(ctx, client.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			m := client.NewMutex(s, "alloc/sdk-"+p.String())
			cycle := func() {
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				if m.Token() == 0 {
					t.Fatal("no token")
				}
				if err := m.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 50 { // the streams are open, the buffers at their size
				cycle()
			}
			// The fewest of three counts: what runs beside the cycles (the
			// runtime's and the test's own work) only adds.
			const cycles = 200
			got := 0.0
			for i := range 3 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for range cycles {
					cycle()
				}
				runtime.ReadMemStats(&after)
				if n := float64(after.Mallocs-before.Mallocs) / cycles; i == 0 || n < got {
					got = n
				}
			}
			if got > budget {
				t.Errorf("%.1f allocations an SDK lock cycle over %s, budget %.0f (see sdkAllocBudgets to update it)", got, p, budget)
			} else {
				t.Logf("%.1f allocations an SDK lock cycle over %s, budget %.0f", got, p, budget)
			}
		})
	}
}
