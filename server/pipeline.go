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

// Pipeline implements LockServiceHandler. Each call runs on its own
// goroutine through the unary handler of the same name, so it behaves
// exactly as that call; answers are sent by one writer that packs every
// answer ready at the moment into one message, so a busy stream costs one
// write for many calls. When the client closes its side of the stream, or
// the connection breaks, every call still running is cancelled as a unary
// call is when its client goes away.
func (h *lockService) Pipeline(ctx context.Context, stream *connect.BidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]) error {
	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	p := &pipeline{
		s:       h.s,
		locks:   h,
		kv:      &kvService{h.s},
		running: make(map[uint64]context.CancelFunc),
		ready:   make(chan struct{}, 1),
	}
	writerDone := make(chan error, 1)
	go func() { writerDone <- p.write(ctx, stream) }()

	var recvErr error
	for {
		req, err := stream.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		// Start the calls before the cancellations: a message may carry a
		// call and its cancellation both, and the cancellation must not be
		// lost because the call was not running yet.
		for _, call := range req.Calls {
			p.start(ctx, call)
		}
		p.cancel(req.Cancel)
		select {
		case err := <-writerDone:
			cancelAll()
			p.calls.Wait()
			return err
		default:
		}
	}
	// The client closed its side (the SDK does so only when it stops
	// waiting for the answers) or went away: cancel the calls in flight,
	// as unary calls are when their client goes away, then end the writer.
	cancelAll()
	p.calls.Wait()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
	if err := <-writerDone; err != nil {
		return err
	}
	return recvErr
}

// pipeline is the state of one Pipeline stream.
type pipeline struct {
	s     *Server
	locks *lockService
	kv    *kvService
	calls sync.WaitGroup

	mu      sync.Mutex
	running map[uint64]context.CancelFunc // calls in flight by id
	answers []*fencedv1.PipelineResult    // ready to send
	closed  bool                          // no more answers will come
	ready   chan struct{}                 // capacity 1: answers or closed changed
}

func (p *pipeline) signal() {
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// answer queues the result of a call for the writer.
func (p *pipeline) answer(r *fencedv1.PipelineResult) {
	p.mu.Lock()
	p.answers = append(p.answers, r)
	p.mu.Unlock()
	p.signal()
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

// start runs one call on its own goroutine.
func (p *pipeline) start(ctx context.Context, call *fencedv1.PipelineCall) {
	id := call.GetId()
	p.mu.Lock()
	_, dup := p.running[id]
	full := len(p.running) >= maxPipelineInFlight
	var cctx context.Context
	var cancel context.CancelFunc
	if !dup && !full {
		cctx, cancel = context.WithCancel(ctx)
		p.running[id] = cancel
	}
	p.mu.Unlock()
	switch {
	case dup:
		p.answer(pipelineError(id, fmt.Errorf("%w: call id %d is already in flight on this stream; ids must be unique among calls in flight", fence.ErrInvalidArgument, id)))
		return
	case full:
		p.answer(pipelineError(id, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("%d calls in flight on this stream, the most it takes; wait for answers or open another stream", maxPipelineInFlight))))
		return
	}
	p.calls.Add(1)
	go func() {
		defer p.calls.Done()
		r := p.run(cctx, call)
		p.mu.Lock()
		delete(p.running, id)
		p.mu.Unlock()
		cancel()
		p.answer(r)
	}()
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
	}
	if msg != nil {
		if err := p.s.authorize(ctx, fencedv1connect.LockServicePipelineProcedure, needOf(msg)); err != nil {
			return pipelineError(id, err)
		}
	}
	switch c := call.GetCall().(type) {
	case *fencedv1.PipelineCall_Acquire:
		resp, err := p.locks.Acquire(ctx, connect.NewRequest(c.Acquire))
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Acquire{Acquire: resp.Msg}}
	case *fencedv1.PipelineCall_Release:
		resp, err := p.locks.Release(ctx, connect.NewRequest(c.Release))
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_Release{Release: resp.Msg}}
	case *fencedv1.PipelineCall_KvPut:
		resp, err := p.kv.Put(ctx, connect.NewRequest(c.KvPut))
		if err != nil {
			return pipelineError(id, err)
		}
		return &fencedv1.PipelineResult{Id: id, Result: &fencedv1.PipelineResult_KvPut{KvPut: resp.Msg}}
	default:
		return pipelineError(id, fmt.Errorf("%w: call %d has no acquire, release or kv_put", fence.ErrInvalidArgument, id))
	}
}

// write sends the answers as they become ready, all those ready at once in
// one message, until the pipeline is closed and drained.
func (p *pipeline) write(ctx context.Context, stream *connect.BidiStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]) error {
	for {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil
		}
		// Answers come in bursts (a Raft batch completes many calls at
		// once): let the burst queue up, then send it as one message.
		runtime.Gosched()
		p.mu.Lock()
		batch, closed := p.answers, p.closed
		p.answers = nil
		p.mu.Unlock()
		if len(batch) > 0 {
			if err := stream.Send(&fencedv1.PipelineResponse{Results: batch}); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
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
