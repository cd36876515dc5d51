package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// maxPipelineInFlight bounds the calls one Pipeline stream may have in
// flight; calls beyond it fail with ResourceExhausted.
const maxPipelineInFlight = 100000

// maxPipelineSpare is the most answers a Pipeline stream's reused batch
// of answers keeps room for.
const maxPipelineSpare = 1024

// Pipeline implements LockServiceHandler. Each call runs on its own
// goroutine through the unary handler of the same name, so it behaves
// exactly as that call. The stream's first response, sent at once, names
// the kinds of call it takes (pipelineCalls). Answers are sent without a writer goroutine of
// their own: the call that finishes while no answer is being sent sends
// its answer together with every answer queued meanwhile, in one message,
// so a busy stream costs one write for many calls and a quiet one no
// hand-off to another goroutine. When the client closes its side of the
// stream, or the connection breaks, every call still running is cancelled
// as a unary call is when its client goes away.
func (h *lockService) Pipeline(ctx context.Context, stream *connect.BidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]) error {
	return h.pipeline(ctx, stream)
}

// pipelineCalls are the kinds of call Pipeline takes, as its first
// response names them (PipelineResponse.calls): a kind added to
// PipelineCall or to the QueueCalls it carries is named here, so that a
// client sends it only to a server that takes it.
var pipelineCalls = []fencedv1.PipelineCallKind{
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LOCK_AND_KV,
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE,
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_QUEUE_BATCH,
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LIMITER,
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_SEMAPHORE,
	fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_RWLOCK,
}

// bidiStream is the server's side of a bidirectional stream: a Connect
// stream or a native one (native.go). The stream handlers take it, so both
// protocols run the same code.
type bidiStream[Req, Resp any] interface {
	Receive() (*Req, error)
	Send(*Resp) error
}

// pipeline serves one Pipeline stream (see Pipeline); ctx carries the
// caller, as authentication found it.
func (h *lockService) pipeline(ctx context.Context, stream bidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]) error {
	p := h.newPipeline(ctx, stream)
	if err := p.announce(); err != nil {
		return p.finish(err)
	}
	var recvErr error
	for {
		req, err := stream.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		if !p.handle(req) {
			break
		}
	}
	return p.finish(recvErr)
}

// newPipeline returns the state of a new Pipeline stream whose calls run
// in a context derived from ctx. Its owner hands it each message received
// (handle), in order, from one goroutine, then ends it (finish).
func (h *lockService) newPipeline(ctx context.Context, stream bidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]) *pipeline {
	p := &pipeline{
		s:          h.s,
		locks:      h,
		kv:         &kvService{h.s},
		queues:     &queueService{h.s},
		limits:     &limiterService{h.s},
		semaphores: &semaphoreService{h.s},
		rwlocks:    &rwLockService{h.s},
		stream:     stream,
		running:    make(map[uint64]context.CancelFunc),
		failed:     make(chan struct{}),
	}
	p.ctx, p.cancelAll = context.WithCancel(ctx)
	return p
}

// announce sends the stream's first response: the kinds of call this
// Pipeline takes, before any answer, so a client knows before it sends
// one (none under the OldPipeline fault, which plays a server from
// before). It is sent before any call is started, so nothing else sends
// on the stream at the same time.
func (p *pipeline) announce() error {
	calls := p.s.faults.pipelineCalls(pipelineCalls)
	if calls == nil {
		return nil
	}
	return p.stream.Send(&fencedv1.PipelineResponse{Calls: calls})
}

// handle starts the calls of one message received and performs its
// cancellations, without waiting for any call. It reports false once a
// Send failed: the stream is broken and nothing more should be handed in.
func (p *pipeline) handle(req *fencedv1.PipelineRequest) bool {
	// Start the calls before the cancellations: a message may carry a
	// call and its cancellation both, and the cancellation must not be
	// lost because the call was not running yet.
	var envelope error
	if len(req.ProtoReflect().GetUnknown()) > 0 {
		envelope = refuseUnknown("the Pipeline message carrying the call", req)
	}
	for _, call := range req.Calls {
		err := envelope
		if err == nil {
			err = refuseUnknown("the call", call)
		}
		if err != nil {
			p.answerAsync(pipelineError(call.GetId(), err))
			continue
		}
		p.start(p.ctx, call)
	}
	p.cancel(req.Cancel)
	select {
	case <-p.failed:
		return false
	default:
		return true
	}
}

// finish ends the stream once no more messages are handed in: the client
// closed its side (recvErr nil; the SDK does so only when it stops
// waiting for the answers), went away or the stream broke (recvErr). It
// cancels the calls in flight, as unary calls are when their client goes
// away, waits for them and returns the stream's error: the failed Send's,
// else recvErr. Every call sends its answer before it is done, so once
// they are all done nothing is left to send and no Send follows finish.
func (p *pipeline) finish(recvErr error) error {
	p.cancelAll()
	p.calls.Wait()
	if p.sendErr != nil {
		return p.sendErr
	}
	return recvErr
}

// pipeline is the state of one Pipeline stream.
type pipeline struct {
	s          *Server
	locks      *lockService
	kv         *kvService
	queues     *queueService
	limits     *limiterService
	semaphores *semaphoreService
	rwlocks    *rwLockService
	stream     bidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]
	// ctx is the context of the stream's calls; cancelAll cancels it.
	ctx       context.Context
	cancelAll context.CancelFunc
	// calls counts the goroutines that run a call or send answers.
	calls sync.WaitGroup

	mu      sync.Mutex
	running map[uint64]context.CancelFunc // calls in flight by id
	answers []*fencedv1.PipelineResult    // ready to send
	spare   []*fencedv1.PipelineResult    // the last batch sent, reused for answers
	sending bool                          // a goroutine is sending answers
	// resp is the message flush sends, reused: only the goroutine that
	// is sending uses it, and a Send has encoded it when it returns.
	resp    fencedv1.PipelineResponse
	sendErr error         // the Send that failed; set once, before failed is closed
	failed  chan struct{} // closed when a Send failed
}

// answer queues the result of a call and, unless another goroutine is
// sending already (it will send this one too), sends it with every
// answer queued meanwhile. It reports whether the caller must send
// (flush); only then has it set sending.
func (p *pipeline) answer(r *fencedv1.PipelineResult) (mustFlush bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers = append(p.answers, r)
	if p.sending || p.sendErr != nil {
		return false
	}
	p.sending = true
	return true
}

// flush sends the queued answers, all those queued at once in one
// message, until none is left; the caller set sending (answer said so).
// After a failed Send nothing more is sent.
//
// When other calls of the stream are still running, flush first yields
// its processor once (runtime.Gosched) before it takes the first batch.
// The calls of one Raft entry finish together, but the committer wakes
// their goroutines one after another, and they queue behind the first
// one woken: without the yield that one sends its own answer alone, and
// then each batch that queued during the previous Send. With it, those
// goroutines run first and queue their answers, which go out in one
// message. Under 64 lockers sharing one client (1 node), this took the
// server's write calls from about 1.75 to 0.43 per lock cycle (its WAL's
// writes included) and its CPU from about 42 to 38 µs a cycle
// (docs/benchmarks.md, "Answers of one entry in one message"). A stream
// with one call in flight, as an independent client's, never yields.
func (p *pipeline) flush() {
	for first := true; ; first = false {
		p.mu.Lock()
		if first && len(p.running) > 0 {
			p.mu.Unlock()
			runtime.Gosched()
			p.mu.Lock()
		}
		batch := p.answers
		if len(batch) == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		p.answers, p.spare = p.spare, nil
		p.mu.Unlock()
		p.resp.Results = batch
		err := p.stream.Send(&p.resp)
		p.resp.Results = nil
		clear(batch) // the answers are encoded: let them go
		p.mu.Lock()
		if err != nil {
			p.sendErr, p.sending, p.answers = err, false, nil
			p.mu.Unlock()
			close(p.failed)
			return
		}
		if cap(batch) <= maxPipelineSpare {
			p.spare = batch[:0]
		}
		p.mu.Unlock()
	}
}

// answerAsync queues r from the receiving goroutine, which must not block
// on a Send: when r has to be sent, another goroutine sends it.
func (p *pipeline) answerAsync(r *fencedv1.PipelineResult) {
	if p.answer(r) {
		p.calls.Go(p.flush)
	}
}

// cancel cancels the calls named by ids that are still running.
func (p *pipeline) cancel(ids []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if cancel, ok := p.running[id]; ok {
			cancel()
		}
	}
}

// start runs one call on a goroutine of its own (a kept worker).
func (p *pipeline) start(ctx context.Context, call *fencedv1.PipelineCall) {
	id := call.GetId()
	p.mu.Lock()
	_, dup := p.running[id]
	full := len(p.running) >= maxPipelineInFlight
	var cctx context.Context
	var cancel context.CancelFunc
	if !dup && !full {
		// No deadline: a call's one bounded step is its proposal, which
		// propose bounds by Config.ProposeTimeout without a context or
		// timer of its own (raftstore's ProposeWithin); an acquire with
		// wait_ms may wait for hours.
		cctx, cancel = context.WithCancel(ctx)
		p.running[id] = cancel
	}
	p.mu.Unlock()
	switch {
	case dup:
		p.answerAsync(pipelineError(id, fmt.Errorf("%w: call id %d is already in flight on this stream; ids must be unique among calls in flight", fence.ErrInvalidArgument, id)))
		return
	case full:
		p.answerAsync(pipelineError(id, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%d calls in flight on this stream, the most it takes; wait for answers or open another stream", maxPipelineInFlight))))
		return
	}
	p.calls.Add(1)
	p.s.calls.run(func() {
		defer p.calls.Done()
		r := p.run(cctx, call)
		p.mu.Lock()
		delete(p.running, id)
		p.mu.Unlock()
		cancel()
		if p.answer(r) {
			p.flush()
		}
	})
}

// run performs one call through the unary handler of its kind.
func (p *pipeline) run(ctx context.Context, call *fencedv1.PipelineCall) *fencedv1.PipelineResult {
	id := call.GetId()
	// The calls reach the handlers without the interceptor: each is
	// authorized here, as its unary call would be.
	var msg any
	switch c := call.GetCall().(type) {
	case *fencedv1.PipelineCall_Acquire:
		msg = c.Acquire
	case *fencedv1.PipelineCall_Release:
		msg = c.Release
	case *fencedv1.PipelineCall_KvPut:
		msg = c.KvPut
	case *fencedv1.PipelineCall_Queue:
		return p.runQueue(ctx, id, c.Queue)
	case *fencedv1.PipelineCall_Semaphore:
		return p.runSemaphore(ctx, id, c.Semaphore)
	case *fencedv1.PipelineCall_Rwlock:
		return p.runRWLock(ctx, id, c.Rwlock)
	case *fencedv1.PipelineCall_LimiterTake:
		if err := p.s.faults.oldPipelineCall(id); err != nil {
			return pipelineError(id, err)
		}
		msg = c.LimiterTake
	}
	if msg != nil {
		if err := p.s.authorize(ctx, fencedv1connect.LockServicePipelineProcedure, needOf(msg)); err != nil {
			return pipelineError(id, err)
		}
	}
	switch c := call.GetCall().(type) {
	case *fencedv1.PipelineCall_Acquire:
		resp, err := p.locks.acquireMsg(ctx, c.Acquire)
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Acquire{Acquire: resp}}
	case *fencedv1.PipelineCall_Release:
		resp, err := p.locks.releaseMsg(ctx, c.Release)
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Release{Release: resp}}
	case *fencedv1.PipelineCall_KvPut:
		resp, err := p.kv.Put(ctx, connect.NewRequest(c.KvPut))
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_KvPut{KvPut: resp.Msg}}
	case *fencedv1.PipelineCall_LimiterTake:
		resp, err := p.limits.Take(ctx, connect.NewRequest(c.LimiterTake))
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_LimiterTake{LimiterTake: resp.Msg}}
	default:
		return pipelineError(id, fmt.Errorf("%w: call %d has no acquire, release, kv_put, queue, limiter_take, semaphore or rwlock", fence.ErrInvalidArgument, id))
	}
}

// pipelineError is the answer of a call that failed with err, in the form
// its unary call would have failed.
func pipelineError(id uint64, err error) *fencedv1.PipelineResult {
	ce := connectError(err)
	pe := &fencedv1.PipelineError{Code: uint32(ce.Code()), Message: ce.Message()}
	for k, v := range ce.Meta() {
		if len(v) > 0 {
			if pe.Meta == nil {
				pe.Meta = map[string]string{}
			}
			pe.Meta[k] = v[0]
		}
	}
	return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Error{Error: pe}}
}

// connectError returns err as a *connect.Error, translating it as the
// unary handlers do when it is not one.
func connectError(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(toConnect(err), &ce) {
		return ce
	}
	return connect.NewError(connect.CodeInternal, err)
}
