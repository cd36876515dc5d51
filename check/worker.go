package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// WorkerConfig configures one client worker process.
type WorkerConfig struct {
	// ID names the process in the history (p1, p2...).
	ID string
	// Endpoints are the servers (the harness's API proxies).
	Endpoints []string
	// Names are the contended objects; their prefix says of which
	// workload each is (workload.go). Each protects the kv key of its name
	// (a semaphore, the keys of its slots).
	Names []string
	// Capacity is the capacity of the semaphores.
	Capacity int
	// TTL is the TTL of sessions and TTL locks.
	TTL time.Duration
	// Seed seeds the worker's choices.
	Seed uint64
	// CAFile, when set, is the CA the servers' certificates are verified
	// against: the worker talks TLS. TokenFile then holds its bearer token.
	CAFile, TokenFile string
	// Out receives the history as JSON lines, one per completed operation.
	Out io.Writer
}

// requestTimeout bounds one request of a worker.
const requestTimeout = time.Second

// recorder writes completed operations as JSON lines, each flushed at
// once so that a paused or killed worker loses nothing it completed.
type recorder struct {
	mu  sync.Mutex
	enc *json.Encoder
	id  string
}

func (r *recorder) record(op history.Op) {
	op.Process = r.id
	if op.Complete == 0 {
		op.Complete = time.Now().UnixNano()
	}
	r.mu.Lock()
	r.enc.Encode(op)
	r.mu.Unlock()
}

// outcomeOf classifies an error: nil is OK; a definite refusal is Fail; a
// stale token is Stale; anything that may have taken effect is Unknown.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, fence.ErrStaleToken):
		return history.Stale
	case errors.Is(err, fence.ErrNotGranted), errors.Is(err, fence.ErrInvalidArgument), errors.Is(err, fence.ErrInvalidToken),
		errors.Is(err, fence.ErrScopeMismatch): // refused by the kv scope rule: nothing changed
		return history.Fail
	}
	return history.Unknown
}

// waitOutcome is outcomeOf for an acquire that waited: a wait that ran
// out is Unknown, for the SDK took the waiter out of the queue and
// released a grant that may have raced it: maybe granted, briefly.
func waitOutcome(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return history.Unknown
	}
	return outcomeOf(err)
}

// openSession opens a session of ttl within sctx; the function it returns
// closes it. On an error it waits a little within ctx (the cluster may be
// unavailable) before it returns.
func openSession(sctx, ctx context.Context, c *client.Client, ttl time.Duration) (*client.Session, func(), error) {
	s, err := c.NewSession(sctx, client.WithTTL(ttl))
	if err != nil {
		sleepCtx(ctx, 50*time.Millisecond)
		return nil, nil, err
	}
	return s, func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		s.Close(cctx)
		ccancel()
	}, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// RunWorker runs the workload of one client process until ctx ends: it
// repeatedly takes one of the contended objects — a lock (waiting in the
// queue with a session, or as a TTL lock it then lets expire), permits of
// a semaphore, a read or write grant of a read/write lock, or an
// election's leadership — now and then writes a key outside its grant's
// scope with its token (worker_crossscope.go), reads and writes the object's kv key under the
// token (a permit's slot key; readers only read), and releases or lets the
// grant expire. It writes with its token without first checking that it still
// holds the lock: the naive holder whose late writes fencing must stop.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	c, err := newClient(cfg.Endpoints, cfg.CAFile, cfg.TokenFile, client.WithRequestTimeout(requestTimeout))
	if err != nil {
		return err
	}
	defer c.Close()
	hj, err := newHijacker(cfg.Endpoints, cfg.CAFile, cfg.TokenFile)
	if err != nil {
		return err
	}
	rec := &recorder{enc: json.NewEncoder(cfg.Out), id: cfg.ID}
	xs := newCrossScoper(cfg)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	for n := 0; ctx.Err() == nil; n++ {
		name := cfg.Names[rng.IntN(len(cfg.Names))]
		switch workloadOf(name) {
		case WorkloadSemaphore:
			semaphoreRound(ctx, c, xs, rec, rng, cfg, name, n)
			continue
		case WorkloadRWLock:
			rwLockRound(ctx, c, xs, rec, rng, cfg, name, n)
			continue
		case WorkloadElection:
			electionRound(ctx, c, xs, rec, rng, cfg, name, n)
			continue
		case WorkloadQueue:
			if rng.IntN(batchEvery) == 0 {
				queueBatchRound(ctx, c, rec, rng, cfg, name, n)
			} else {
				queueRound(ctx, c, rec, rng, cfg, name, n)
			}
			continue
		case WorkloadLatch:
			latchRound(ctx, c, rec, rng, name)
			continue
		}
		if rng.IntN(10) < 7 {
			sessionRound(ctx, c, hj, xs, rec, rng, cfg, name, n)
		} else {
			ttlLockRound(ctx, c, xs, rec, rng, cfg, name, n)
		}
	}
	return nil
}

// sessionRound takes name with a session (waiting in the queue), works
// under it and releases it; one round in hijackEvery, it also attacks
// another worker's session while it holds the lock.
func sessionRound(ctx context.Context, c *client.Client, hj *hijacker, xs *crossScoper, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeSession, err := openSession(sctx, ctx, c, cfg.TTL)
	if err != nil {
		return
	}
	defer closeSession()
	m := client.NewMutex(s, name)
	op := history.Op{Kind: history.OpAcquire, Name: name, Session: s.ID(), Invoke: time.Now().UnixNano()}
	lctx, lcancel := context.WithTimeout(sctx, 3*time.Second)
	err = m.Lock(lctx)
	lcancel()
	op.Outcome, op.Error = waitOutcome(err), errText(err)
	if err == nil {
		op.Token, op.Signed = uint64(m.Token()), m.Grant().Signed
	}
	rec.record(op)
	if err != nil {
		return
	}
	if rng.IntN(hijackEvery) == 0 {
		hj.attack(ctx, rec, rng, cfg.Names, s.ID())
	}
	xs.maybe(ctx, c, rec, history.GrantLock, name, m.Token(), n)
	work(ctx, c, rec, rng, name, m.Token(), n)
	rel := history.Op{Kind: history.OpRelease, Name: name, Session: s.ID(), Token: uint64(m.Token()), Invoke: time.Now().UnixNano()}
	uctx, ucancel := context.WithTimeout(ctx, 3*time.Second)
	err = m.Unlock(uctx)
	ucancel()
	rel.Outcome, rel.Error = outcomeOf(err), errText(err)
	rec.record(rel)
}

// ttlLockRound tries name once as a TTL lock, works under it and lets
// it expire without releasing.
func ttlLockRound(ctx context.Context, c *client.Client, xs *crossScoper, rec *recorder, rng *rand.Rand, cfg WorkerConfig, name string, n int) {
	op := history.Op{Kind: history.OpAcquire, Name: name, Invoke: time.Now().UnixNano()}
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	l, err := c.Acquire(actx, name, cfg.TTL)
	cancel()
	op.Outcome, op.Error = outcomeOf(err), errText(err)
	if err == nil {
		op.Token, op.Session, op.Signed = uint64(l.Token()), l.Grant().Session, l.Grant().Signed
	}
	rec.record(op)
	if err != nil {
		sleepCtx(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
		return
	}
	xs.maybe(ctx, c, rec, history.GrantLock, name, l.Token(), n)
	work(ctx, c, rec, rng, name, l.Token(), n)
	exp := history.Op{Kind: history.OpExpire, Name: name, Session: l.Grant().Session, Token: uint64(l.Token()), Invoke: time.Now().UnixNano()}
	select {
	case <-l.Context().Done():
	case <-ctx.Done():
	}
	exp.Outcome = history.OK
	rec.record(exp)
}

// work reads and writes the lock's key a few times under the token,
// holding the lock for a while (up to about half the TTL).
func work(ctx context.Context, c *client.Client, rec *recorder, rng *rand.Rand, key string, t fence.Token, n int) {
	for i := 0; i < 2+rng.IntN(4) && ctx.Err() == nil; i++ {
		readKey(ctx, c, rec, key)

		value := fmt.Sprintf("%s-%d-%d", rec.id, n, i)
		putKey(ctx, c, rec, history.Op{Kind: history.OpWrite, Key: key, Token: uint64(t), Value: value})
		sleepCtx(ctx, time.Duration(20+rng.IntN(100))*time.Millisecond)
	}
}

// putKey makes the kv write op (Key, Token, Value) and records it with
// its outcome.
func putKey(ctx context.Context, c *client.Client, rec *recorder, write history.Op) {
	write.Invoke = time.Now().UnixNano()
	// The SDK retries a write with the same request id; the server
	// applies it once and answers the retry with the original version.
	wctx, wcancel := context.WithTimeout(ctx, 2*requestTimeout)
	v, err := c.KVPut(wctx, write.Key, []byte(write.Value), fence.Token(write.Token))
	wcancel()
	write.Outcome, write.Error = outcomeOf(err), errText(err)
	var se *fence.StaleTokenError
	if errors.As(err, &se) {
		write.Required, write.Error = uint64(se.Required), ""
	}
	if err == nil {
		write.Version = v
	}
	rec.record(write)
}

// readKey reads key once and records the read.
func readKey(ctx context.Context, c *client.Client, rec *recorder, key string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	read := history.Op{Kind: history.OpRead, Key: key, Invoke: time.Now().UnixNano()}
	e, err := c.KVGet(rctx, key)
	cancel()
	read.Outcome, read.Error = outcomeOf(err), errText(err)
	switch {
	case errors.Is(err, client.ErrKeyNotFound):
		read.Outcome, read.Error, read.Token = history.NotFound, "", uint64(e.Token)
	case err == nil:
		read.Value, read.Version, read.Token = string(e.Value), e.Version, uint64(e.Token)
	}
	rec.record(read)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
