package server

import (
	"crypto/rand"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	fence "github.com/fenced-dev/fenced"
)

// grantBatcher signs the grants that wait for a signature together
// (fence.SignGrantBatch), so that under load the leader makes one
// Ed25519 signature for many grants instead of one each. A grant's
// handler queues it and waits; a drainer goroutine, started by the grant
// that finds the queue idle, first yields once (runtime.Gosched), so that
// the handlers made runnable with it — a Raft apply wakes the callers of
// all the commands of its batch at once — queue theirs too, then signs
// what is queued, up to max at a time, until nothing is left. A lone
// grant is signed alone (the "fg1." form, as without batching) after that
// one yield; nothing waits to fill a batch.
type grantBatcher struct {
	max int // the most grants of a batch; 1 signs each alone, in its caller

	// deliver, when set (a test build's fault), rewrites the wire forms
	// of each batch signed before they are handed out.
	deliver func(batch []*signJob)
	// drainFn is drain as a func value, made once: `go b.drain()` would
	// allocate a closure per batch.
	drainFn func()

	// grants and signatures count the grants signed and the Ed25519
	// signatures made for them (fenced_signed_grants_total,
	// fenced_grant_signatures_total).
	grants, signatures atomic.Uint64

	mu      sync.Mutex
	busy    bool       // a drainer is running
	pending []*signJob // queued for the drainer
	batch   []*signJob // the drainer's buffer, used by it alone
}

// newGrantBatcher returns a batcher of batches of up to max grants.
func newGrantBatcher(max int) *grantBatcher {
	b := &grantBatcher{max: max}
	b.drainFn = b.drain
	return b
}

// signJobs keeps signJobs for reuse: one is taken per grant signed.
var signJobs = sync.Pool{New: func() any { return new(signJob) }}

// signGrant returns the wire form of g signed under keyID by signer, with
// the grants queued at the same time.
func (b *grantBatcher) signGrant(g fence.SignedGrant, keyID string, signer *grantSigner) (string, error) {
	j := signJobs.Get().(*signJob)
	j.grant, j.keyID, j.signer = g, keyID, signer
	b.sign(j)
	wire, err := j.wire, j.err
	*j = signJob{}
	signJobs.Put(j)
	return wire, err
}

// signJob is one grant to sign and, once signed, its wire form.
type signJob struct {
	grant  fence.SignedGrant
	keyID  string
	signer *grantSigner
	wire   string
	err    error
	done   sync.WaitGroup // released once wire or err is set
}

// sign signs j's grant, with others queued at the same time, and sets
// j.wire or j.err.
func (b *grantBatcher) sign(j *signJob) {
	if b.max <= 1 {
		b.signAll([]*signJob{j})
		return
	}
	j.done.Add(1)
	b.mu.Lock()
	b.pending = append(b.pending, j)
	start := !b.busy
	b.busy = true
	b.mu.Unlock()
	if start {
		go b.drainFn()
	}
	j.done.Wait()
}

// drain signs the queued jobs, up to max at a time, and releases their
// callers, until none is queued; then it leaves the batcher idle.
func (b *grantBatcher) drain() {
	runtime.Gosched()
	for {
		b.mu.Lock()
		n := min(len(b.pending), b.max)
		if n == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		batch := append(b.batch[:0], b.pending[:n]...)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.mu.Unlock()
		b.signAll(batch)
		for _, j := range batch {
			j.done.Done()
		}
		clear(batch)
		b.batch = batch[:0]
	}
}

// signAll signs the jobs of batch with one signature per key among them
// (a rotation may come between two grants of a batch).
func (b *grantBatcher) signAll(batch []*signJob) {
	if b.deliver != nil {
		defer b.deliver(batch)
	}
	b.grants.Add(uint64(len(batch)))
	if len(batch) == 1 {
		b.signatures.Add(1)
		j := batch[0]
		g, err := j.grant.SignWith(j.keyID, j.signer)
		j.wire, j.err = g.String(), err
		return
	}
	for len(batch) > 0 {
		same := make([]fence.SignedGrant, 0, len(batch))
		var rest []*signJob
		var these []*signJob
		for _, j := range batch {
			if j.signer == batch[0].signer && j.keyID == batch[0].keyID {
				same = append(same, j.grant)
				these = append(these, j)
			} else {
				rest = append(rest, j)
			}
		}
		b.signatures.Add(1)
		signed, err := fence.SignGrantBatch(same, batch[0].keyID, batch[0].signer, rand.Reader)
		for i, j := range these {
			if err != nil {
				j.err = err
				continue
			}
			j.wire = signed[i].String()
		}
		batch = rest
	}
}

// collectors returns the batcher's counters for the metrics registry.
func (b *grantBatcher) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fenced_signed_grants_total", Help: "Grants this node signed for their holders (as leader)."},
			func() float64 { return float64(b.grants.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fenced_grant_signatures_total", Help: "Ed25519 signatures this node made for the grants it signed: one per grant signed alone, one per batch (--sign-batch-max)."},
			func() float64 { return float64(b.signatures.Load()) }),
	}
}
