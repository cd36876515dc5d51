package bench

import (
	"context"
	"fmt"
)

// runRead runs the read workload: one kv key, written once under a lock's
// token, then every client reads it with KVGet, one read in flight per
// client. A cycle is one read. Each read is linearizable: the leader
// confirms its leadership with a quorum first, or, with --lease-reads on
// the servers, checks its leader lease instead.
func runRead(ctx context.Context, f *Fenced, o Options) (Result, error) {
	key := fmt.Sprintf("bench/read/%s", runID())
	w, err := f.NewLocker(ctx, 0, o.TTL)
	if err != nil {
		return Result{}, fmt.Errorf("bench: open the writer: %w", err)
	}
	token, err := w.Lock(ctx, key)
	if err == nil {
		err = w.(*fencedLocker).FencedWrite(ctx, key, make([]byte, o.ValueSize), token)
	}
	if err == nil {
		err = w.Unlock(ctx, key)
	}
	closeErr := w.Close()
	if err != nil || closeErr != nil {
		return Result{}, fmt.Errorf("bench: write %s: %v %v", key, err, closeErr)
	}
	return runTimedOps(ctx, o, f.Name(), o.Clients, func(ctx context.Context, i int) error {
		if _, err := f.clients[i%len(f.clients)].KVGet(ctx, key); err != nil {
			return fmt.Errorf("kv get %s: %w", key, err)
		}
		return nil
	})
}
