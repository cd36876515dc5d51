//go:build fencedfaults

package server

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Faults are the fault knobs of a test build (build tag fencedfaults): each
// one breaks a promise on purpose, for the fault harness and its negative
// controls. None is written to the Raft log: they act on this node only,
// so every member of a test cluster is started with the same ones.
type Faults struct {
	// ClockRate runs the leader's lease clock fast (>1) or slow (<1): a
	// server whose clock misbehaves. 0 means 1.
	ClockRate float64
	// UnfencedKV makes this node's state machine accept every kv write,
	// stale or not (the negative control of the stale-write checker).
	UnfencedKV bool
	// UnscopedKV makes this node's state machine skip the kv scope rule
	// but keep the stale-token check: a live token writes any key (the
	// negative control of the scope checker).
	UnscopedKV bool
	// ResetTokens makes a node that becomes leader report the grants it
	// answers with the token counter as if reset to 0 at its takeover:
	// clients see tokens repeat and go down (the negative control of the
	// token-order checker). The committed state is untouched.
	ResetTokens bool
	// AnyOwner makes this node's state machine let any request renew,
	// close, release or acquire for any session, whatever secret it
	// presents (the negative control of the ownership checker).
	AnyOwner bool
	// OverCapacity makes this node's semaphores grant one permit more
	// than their capacity (the negative control of the semaphore
	// checker).
	OverCapacity bool
	// ReaderWithWriter makes this node's read/write locks admit a reader
	// while a writer holds the lock (the negative control of the
	// read/write exclusion checker).
	ReaderWithWriter bool
	// SecondLeader makes this node's elections make a new candidate leader
	// at once while another leads (the negative control of the election
	// checker).
	SecondLeader bool
	// AckAnyToken makes this node's queues accept an ack of a claimed
	// item with any token (the negative control of the queue checker).
	AckAnyToken bool
	// LatchEarly makes this node's latches release a generation's waiters
	// when its count reaches one (the negative control of the latch
	// checker).
	LatchEarly bool
	// MisdeliverSignedGrants makes this node's leader hand each grant it
	// signs the signed grant of the one signed before it (the first gets
	// none): a batcher that mixed up its callers (the negative control of
	// the signed-grant checker).
	MisdeliverSignedGrants bool
	// OldPipeline makes this node's Pipeline say what an older server's
	// says and refuse the queue calls it does not take, so an SDK's
	// fallback to unary calls can be tested: 1, a server from before
	// pipelined queue calls and before PipelineResponse.calls (it names
	// no kind and refuses every queue call); 2, a server that takes the
	// basic queue calls but not the batch calls (push batch, ack batch),
	// and names them so. Both refuse limiter takes and semaphore and
	// read/write lock calls, which no such server took through its
	// Pipeline. The unary calls still work.
	OldPipeline int
}

// faultState is a node's running faults.
type faultState struct {
	cfg   Config
	shift atomic.Uint64 // ResetTokens: the last token when this node took over
}

func newFaultState(cfg Config) *faultState { return &faultState{cfg: cfg} }

// warn logs one WARN line per fault that is on.
func (f *faultState) warn(log *slog.Logger) {
	const msg = "TEST FAULT ON: this server breaks its promises on purpose; never use it in production"
	k := f.cfg.Test.Faults
	if k.ClockRate != 0 && k.ClockRate != 1 {
		log.Warn(msg, "fault", "clock-rate", "rate", k.ClockRate)
	}
	if k.UnfencedKV {
		log.Warn(msg, "fault", "unfenced-kv")
	}
	if k.UnscopedKV {
		log.Warn(msg, "fault", "unscoped-kv")
	}
	if k.ResetTokens {
		log.Warn(msg, "fault", "reset-tokens")
	}
	if k.AnyOwner {
		log.Warn(msg, "fault", "any-owner")
	}
	if k.OverCapacity {
		log.Warn(msg, "fault", "over-capacity")
	}
	if k.ReaderWithWriter {
		log.Warn(msg, "fault", "reader-with-writer")
	}
	if k.SecondLeader {
		log.Warn(msg, "fault", "second-leader")
	}
	if k.AckAnyToken {
		log.Warn(msg, "fault", "ack-any-token")
	}
	if k.LatchEarly {
		log.Warn(msg, "fault", "latch-early")
	}
	if k.MisdeliverSignedGrants {
		log.Warn(msg, "fault", "misdeliver-signed-grants")
	}
	if k.OldPipeline != 0 {
		log.Warn(msg, "fault", "old-pipeline", "as", k.OldPipeline)
	}
	if f.cfg.Raft.Test.Dial != nil {
		log.Warn(msg, "fault", "dial-hook")
	}
}

// clock is the lease clock: the system clock, or one running at ClockRate.
func (f *faultState) clock() fence.Clock {
	rate := f.cfg.Test.ClockRate
	if rate == 0 || rate == 1 {
		return fence.SystemClock{}
	}
	return scaledClock{start: time.Now(), rate: rate}
}

// machine applies the node-local faults of the state machine.
func (f *faultState) machine(m *fsm.Machine) {
	m.SetUnfencedKV(f.cfg.Test.UnfencedKV)
	m.SetUnscopedKV(f.cfg.Test.UnscopedKV)
	m.SetAnyOwner(f.cfg.Test.AnyOwner)
	m.SetOverCapacity(f.cfg.Test.OverCapacity)
	m.SetReaderWithWriter(f.cfg.Test.ReaderWithWriter)
	m.SetSecondLeader(f.cfg.Test.SecondLeader)
	m.SetAckAnyToken(f.cfg.Test.AckAnyToken)
	m.SetLatchEarly(f.cfg.Test.LatchEarly)
}

// batcher applies MisdeliverSignedGrants to the grant batcher: each job
// signed gets the wire form of the job signed before it.
func (f *faultState) batcher(b *grantBatcher) {
	if !f.cfg.Test.MisdeliverSignedGrants {
		return
	}
	var mu sync.Mutex // --sign-batch-max 1 signs on the callers' goroutines
	var last string
	b.deliver = func(batch []*signJob) {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range batch {
			j.wire, last = last, j.wire
		}
	}
}

// tookOver records the last token issued when this node became leader.
func (f *faultState) tookOver(last uint64) {
	if f.cfg.Test.ResetTokens {
		f.shift.Store(last)
	}
}

// rewritesGrants reports whether reported may hand out a grant other
// than the one applied (ResetTokens), which a grant signed before its
// handler runs (presignGrants) would not match.
func (f *faultState) rewritesGrants() bool { return f.cfg.Test.ResetTokens }

// reported is the grant as this node reports it to a client.
func (f *faultState) reported(g fence.Grant) fence.Grant {
	if shift := fence.Token(f.shift.Load()); g.Token > shift {
		g.Token -= shift
	}
	return g
}

// scaledClock is a fence.Clock running at rate times real time.
type scaledClock struct {
	start time.Time
	rate  float64
}

func (c scaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.rate))
}

// latchDone reports whether a latch generation with count left releases
// its waiters: at zero, or at one under LatchEarly.
func (f *faultState) latchDone(count uint64) bool {
	return count == 0 || (f.cfg.Test.LatchEarly && count == 1)
}

// pipelineCalls is what this node's Pipeline names in its first
// response: all the kinds, or an older server's (OldPipeline); nil sends
// no such response, as a server from before PipelineResponse.calls.
func (f *faultState) pipelineCalls(all []fencedv1.PipelineCallKind) []fencedv1.PipelineCallKind {
	switch f.cfg.Test.OldPipeline {
	case 1:
		return nil
	case 2:
		return []fencedv1.PipelineCallKind{fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LOCK_AND_KV, fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE}
	}
	return all
}

// oldPipelineCall is the answer of an older server's Pipeline to a
// limiter take, a semaphore call or a read/write lock call, or nil
// (OldPipeline): both older servers it plays are from before those rode
// the Pipeline.
func (f *faultState) oldPipelineCall(id uint64) error {
	if f.cfg.Test.OldPipeline != 0 {
		return fmt.Errorf("%w: call %d has no acquire, release, kv_put or queue", fence.ErrInvalidArgument, id)
	}
	return nil
}

// oldPipeline is the answer of an older server's Pipeline to the queue
// call call, or nil (OldPipeline).
func (f *faultState) oldPipeline(id uint64, call *fencedv1.QueueCall) error {
	switch f.cfg.Test.OldPipeline {
	case 1:
		return fmt.Errorf("%w: call %d has no acquire, release or kv_put", fence.ErrInvalidArgument, id)
	case 2:
		if call.GetPushBatch() != nil || call.GetAckBatch() != nil {
			return fmt.Errorf("%w: call %d: the queue call has no push, claim, ack or nack", fence.ErrInvalidArgument, id)
		}
	}
	return nil
}
