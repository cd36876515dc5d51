package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	read, done := n.probeRead(i)
	if read == nil {
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
				read(rctx, &op)
				cancel()
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
		done()
	}
}

// probeRead returns how resumeProbe reads a key at node i: a plain
// HTTP/1.1 GET /v1/kv/KEY on a connection of its own, so that the request
// is complete in the node's socket buffer and is served as soon as the
// node runs (an SDK client would first exchange HTTP/2 settings with the
// resumed node, and answer later than a stale lease could be used), or,
// on a secure cluster, the admin SDK client of that node alone. The read
// fills in op's outcome; done releases what it holds.
func (n *nemesis) probeRead(i int) (read func(ctx context.Context, op *history.Op), done func()) {
	addr := n.c.apiProxy[i].Addr()
	if n.c.sec.certsDir == "" {
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		return func(ctx context.Context, op *history.Op) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/kv/"+op.Key, nil)
			if err != nil {
				op.Outcome, op.Error = history.Unknown, err.Error()
				return
			}
			res, err := hc.Do(req)
			if err != nil {
				op.Outcome, op.Error = history.Unknown, err.Error()
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			token, _ := strconv.ParseUint(res.Header.Get("X-Fencing-Token"), 10, 64)
			version, verr := strconv.ParseUint(strings.Trim(res.Header.Get("ETag"), `"`), 10, 64)
			switch {
			case err != nil:
				op.Outcome, op.Error = history.Unknown, err.Error()
			case res.StatusCode == http.StatusNotFound:
				op.Outcome, op.Token = history.NotFound, token
			case res.StatusCode == http.StatusOK && verr == nil:
				op.Outcome, op.Value, op.Version, op.Token = history.OK, string(body), version, token
			default:
				op.Outcome, op.Error = history.Unknown, fmt.Sprintf("%s: %s", res.Status, body)
			}
		}, func() {}
	}
	cl, err := n.c.sec.adminClient([]string{addr})
	if err != nil {
		return nil, nil
	}
	return func(ctx context.Context, op *history.Op) {
		e, err := cl.KVGet(ctx, op.Key)
		op.Outcome, op.Error = outcomeOf(err), errText(err)
		switch {
		case errors.Is(err, client.ErrKeyNotFound):
			op.Outcome, op.Error, op.Token = history.NotFound, "", uint64(e.Token)
		case err == nil:
			op.Value, op.Version, op.Token = string(e.Value), e.Version, uint64(e.Token)
		}
	}, func() { cl.Close() }
}
