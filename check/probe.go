package check

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// probeReadsPerKey is how many reads of each key resumeProbe sends at once.
const probeReadsPerKey = 4

// resumeProbe sends reads of every kv key the workers write to node i
// alone, through its API proxy, while i is stopped (pause-server), so that
// they wait in its socket buffers and are the first thing it sees when it
// resumes. Each is recorded as a read for the linearizability checker:
// invoked after every write the others acknowledged during the pause, a
// read answered from the paused node's old state is a violation. That is
// the stale read a leader serving reads on an expired lease would give
// (--lease-reads; --unchecked-lease-reads is its negative control). It
// returns 200 ms after sending them; the returned function waits for the
// answers and records them; call it after SIGCONT.
func (n *nemesis) resumeProbe(ctx context.Context, i int) (wait func()) {
	if len(n.keys) == 0 {
		return func() {}
	}
	cl, err := n.c.sec.adminClient([]string{n.c.apiProxy[i].Addr()})
	if err != nil {
		return func() {}
	}
	var wg sync.WaitGroup
	for _, key := range n.keys {
		for j := range probeReadsPerKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				op := history.Op{Process: fmt.Sprintf("probe-%s-%d", key, j), Kind: history.OpRead, Key: key, Invoke: time.Now().UnixNano()}
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				e, err := cl.KVGet(rctx, key)
				cancel()
				op.Outcome, op.Error = outcomeOf(err), errText(err)
				switch {
				case errors.Is(err, client.ErrKeyNotFound):
					op.Outcome, op.Error, op.Token = history.NotFound, "", uint64(e.Token)
				case err == nil:
					op.Value, op.Version, op.Token = string(e.Value), e.Version, uint64(e.Token)
				}
				op.Complete = time.Now().UnixNano()
				n.record(op)
			}()
		}
	}
	// Time for the reads to reach the stopped node (not needed for the
	// verdict: a read that arrives after it resumed is judged the same).
	sleepCtx(ctx, 200*time.Millisecond)
	return func() {
		wg.Wait()
		cl.Close()
	}
}
