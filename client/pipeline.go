package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// pipeline sends an endpoint's Acquire, Release and KV Put calls over one
// LockService.Pipeline stream, opened on first use and again after it
// fails. Calls from any number of goroutines share the stream: each is
// sent without waiting for the others, the calls queued while a message
// was being sent go out together in the next one, and each answer is
// matched to its call by id. One stream costs the client and the server
// far less per call than an HTTP/2 request each.
//
// A call behaves as its unary form: it fails with a *connect.Error of the
// same code and message (Unavailable when the stream broke before the
// answer came), so the SDK's retry loop treats both alike.
type pipeline struct {
	c  *Client
	ep *endpoint

	mu sync.Mutex
	st *pipeStream // nil until opened, and after it failed
}

// pipeStream is one open Pipeline stream.
type pipeStream struct {
	p      *pipeline
	stream clientStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]
	cancel context.CancelFunc
	signal chan struct{} // capacity 1: calls or cancels to send
	done   chan struct{} // closed when the stream failed
	err    error         // why, once done is closed
	once   sync.Once
	// opened is when the stream was opened; lastRecv is when the last
	// message arrived, as nanoseconds since opened (monotonic).
	opened   time.Time
	lastRecv atomic.Int64
	// takes has bit 1<<k for each PipelineCallKind k the server's Pipeline
	// takes, as its first response named them; told is set once that
	// response arrived (a server that names none takes lock and kv calls).
	takes atomic.Uint32
	told  atomic.Bool

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan *fencedv1.PipelineResult
	calls   []*fencedv1.PipelineCall
	cancels []uint64
}

// errNotSent is wrapped by the error of a pipeline call that ended before
// it was sent: the server never saw it.
var errNotSent = errors.New("the call was not sent")

// call sends one call and waits for its answer, the stream's failure or
// the end of ctx. A call whose ctx ends before the call was sent is not
// sent at all, and its error wraps errNotSent; one whose ctx ends later is
// cancelled on the server, as a unary call is when its client goes away.
func (p *pipeline) call(ctx context.Context, call *fencedv1.PipelineCall) (*fencedv1.PipelineResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err, true)
	}
	st, err := p.stream()
	if err != nil {
		return nil, err
	}
	return st.call(ctx, call)
}

// callKind sends call, of kind, as call does if the stream's server said
// its Pipeline takes that kind; if it did not, or has not said yet (its
// first response is on its way), taken is false and nothing is sent.
func (p *pipeline) callKind(ctx context.Context, kind fencedv1.PipelineCallKind, call *fencedv1.PipelineCall) (r *fencedv1.PipelineResult, taken bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, true, ctxError(err, true)
	}
	st, err := p.stream()
	if err != nil {
		return nil, true, err
	}
	if !st.told.Load() || st.takes.Load()&(1<<kind) == 0 {
		return nil, false, nil
	}
	r, err = st.call(ctx, call)
	return r, true, err
}

// call sends one call on st and waits for its answer (pipeline.call).
func (st *pipeStream) call(ctx context.Context, call *fencedv1.PipelineCall) (*fencedv1.PipelineResult, error) {
	answer := make(chan *fencedv1.PipelineResult, 1)
	sent := time.Now()
	st.mu.Lock()
	st.nextID++
	id := st.nextID
	call.Id = id
	st.waiting[id] = answer
	st.calls = append(st.calls, call)
	st.mu.Unlock()
	st.poke()

	select {
	case r := <-answer:
		if e := r.GetError(); e != nil {
			return nil, pipelineError(e)
		}
		return r, nil
	case <-st.done:
		return nil, connect.NewError(connect.CodeUnavailable, st.err)
	case <-ctx.Done():
		st.mu.Lock()
		unsent := st.unqueue(call)
		if _, ok := st.waiting[id]; ok {
			delete(st.waiting, id)
			if !unsent {
				st.cancels = append(st.cancels, id)
			}
		}
		st.mu.Unlock()
		if unsent {
			return nil, ctxError(ctx.Err(), true)
		}
		st.poke()
		// Nothing at all came back while this call waited: the connection
		// may be silently dead (a partition does not reset it). Let the
		// next call open a new stream.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && st.lastRecv.Load() < int64(sent.Sub(st.opened)) {
			err := fmt.Errorf("no answer on the pipeline stream for %v", time.Since(sent).Round(time.Millisecond))
			st.fail(err)
			abortConn(st.stream, err, sent)
		}
		return nil, ctxError(ctx.Err(), false)
	}
}

// unqueue takes call out of the queue of calls to send, if it is still
// there, and reports whether it was. Call with st.mu held.
func (st *pipeStream) unqueue(call *fencedv1.PipelineCall) bool {
	for i, c := range st.calls {
		if c == call {
			st.calls = append(st.calls[:i], st.calls[i+1:]...)
			return true
		}
	}
	return false
}

// ctxError is the error of a call whose context ended with err, in the
// form a unary call's would have; unsent adds errNotSent.
func ctxError(err error, unsent bool) error {
	code := connect.CodeCanceled
	if errors.Is(err, context.DeadlineExceeded) {
		code = connect.CodeDeadlineExceeded
	}
	if unsent {
		err = fmt.Errorf("%w: %w", errNotSent, err)
	}
	return connect.NewError(code, err)
}

// stream returns the open stream, opening one when there is none.
func (p *pipeline) stream() (*pipeStream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st != nil {
		return p.st, nil
	}
	if err := p.c.closed(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(p.c.ctx)
	st := &pipeStream{
		p: p,
		// Opened by the send and receive loops, not under p.mu: a native
		// stream may dial the endpoint first.
		stream: &lazyStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]{open: func() clientStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse] {
			return p.c.openPipeline(ctx, p.ep)
		}},
		opened:  time.Now(),
		cancel:  cancel,
		signal:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		waiting: make(map[uint64]chan *fencedv1.PipelineResult),
	}
	st.lastRecv.Store(-1) // nothing received yet
	ok := p.c.goRun(st.sendLoop)
	ok = ok && p.c.goRun(st.recvLoop)
	ok = ok && p.c.goRun(func() {
		// Once the stream fails or the Client closes, abort the HTTP/2
		// stream, which ends a Receive in progress and cancels on the
		// server every call still in flight (the transport does not always
		// do so on its own when the request's context ends).
		<-ctx.Done()
		_ = st.stream.CloseResponse()
	})
	if !ok {
		st.fail(ErrClosed)
		return nil, ErrClosed
	}
	p.st = st
	return st, nil
}

func (st *pipeStream) poke() {
	select {
	case st.signal <- struct{}{}:
	default:
	}
}

// fail ends the stream with err, once; calls waiting on it fail with
// Unavailable and the next call opens a new stream.
func (st *pipeStream) fail(err error) {
	st.once.Do(func() {
		st.err = err
		close(st.done)
		st.cancel()
		st.p.mu.Lock()
		if st.p.st == st {
			st.p.st = nil
		}
		st.p.mu.Unlock()
	})
}

// sendLoop sends the queued calls and cancellations, all those queued
// since the last send in one message.
func (st *pipeStream) sendLoop() {
	defer st.stream.CloseRequest()
	// An empty first message opens the stream on the server (Connect and
	// the native protocol alike send nothing before it), so that its first
	// response, naming what its Pipeline takes, comes even when the first
	// calls are of kinds not yet known to be taken and go unary.
	if err := st.stream.Send(&fencedv1.PipelineRequest{}); err != nil {
		st.fail(fmt.Errorf("pipeline send: %w", err))
		return
	}
	for {
		select {
		case <-st.signal:
		case <-st.done:
			return
		}
		// Let the goroutines about to queue calls do so first: calls
		// come in bursts, and one message for the burst costs one write.
		runtime.Gosched()
		st.mu.Lock()
		calls, cancels := st.calls, st.cancels
		st.calls, st.cancels = nil, nil
		st.mu.Unlock()
		for _, req := range pipelineMessages(calls, cancels) {
			if err := st.stream.Send(req); err != nil {
				st.fail(fmt.Errorf("pipeline send: %w", err))
				return
			}
		}
	}
}

// maxPipelineMessageBytes is the size up to which calls are packed into
// one message: well below the server's 64 KiB limit for a message of the
// lock service's other calls. A single larger call (a kv put of a big
// value) goes alone; the server takes up to its kv limit for those.
const maxPipelineMessageBytes = 32 << 10

// pipelineMessages packs calls and cancellations into as few messages as
// the size budget allows.
func pipelineMessages(calls []*fencedv1.PipelineCall, cancels []uint64) []*fencedv1.PipelineRequest {
	var out []*fencedv1.PipelineRequest
	cur := &fencedv1.PipelineRequest{Cancel: cancels}
	size := 10 * len(cancels)
	for _, c := range calls {
		n := proto.Size(c) + 8
		if len(cur.Calls) > 0 && size+n > maxPipelineMessageBytes {
			out = append(out, cur)
			cur, size = &fencedv1.PipelineRequest{}, 0
		}
		cur.Calls = append(cur.Calls, c)
		size += n
	}
	if len(cur.Calls) > 0 || len(cur.Cancel) > 0 {
		out = append(out, cur)
	}
	return out
}

// recvLoop hands each answer to the call waiting for it.
func (st *pipeStream) recvLoop() {
	defer st.stream.CloseResponse()
	for {
		resp, err := st.stream.Receive()
		if err != nil {
			st.fail(fmt.Errorf("pipeline receive: %w", err))
			return
		}
		st.lastRecv.Store(int64(time.Since(st.opened)))
		if !st.told.Load() {
			st.told.Store(true)
			st.learn(resp.GetCalls())
		}
		st.mu.Lock()
		for _, r := range resp.GetResults() {
			if answer, ok := st.waiting[r.GetId()]; ok {
				delete(st.waiting, r.GetId())
				answer <- r
			}
		}
		st.mu.Unlock()
	}
}

// learn records the kinds of call the server's Pipeline takes, from its
// first response: the kinds it names, and lock and kv calls, which every
// Pipeline takes (a server from before PipelineResponse.calls names none).
func (st *pipeStream) learn(kinds []fencedv1.PipelineCallKind) {
	bits := uint32(1) << fencedv1.PipelineCallKind_PIPELINE_CALL_KIND_LOCK_AND_KV
	for _, k := range kinds {
		if k > 0 && k < 32 {
			bits |= 1 << k
		}
	}
	st.takes.Store(bits)
}

// pipelineError rebuilds the *connect.Error a unary call would have
// returned.
func pipelineError(e *fencedv1.PipelineError) error {
	ce := connect.NewError(connect.Code(e.GetCode()), errors.New(e.GetMessage()))
	for k, v := range e.GetMeta() {
		ce.Meta().Set(k, v)
	}
	return ce
}

// acquire sends an Acquire through the endpoint's pipeline.
func (ep *endpoint) acquire(ctx context.Context, req *fencedv1.AcquireRequest) (*fencedv1.AcquireResponse, error) {
	r, err := ep.pipe.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Acquire{Acquire: req}})
	if err != nil {
		return nil, err
	}
	return r.GetAcquire(), nil
}

// release sends a Release through the endpoint's pipeline.
func (ep *endpoint) release(ctx context.Context, req *fencedv1.ReleaseRequest) (*fencedv1.ReleaseResponse, error) {
	r, err := ep.pipe.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Release{Release: req}})
	if err != nil {
		return nil, err
	}
	return r.GetRelease(), nil
}

// kvPut sends a KV Put through the endpoint's pipeline.
func (ep *endpoint) kvPut(ctx context.Context, req *fencedv1.KVPutRequest) (*fencedv1.KVPutResponse, error) {
	r, err := ep.pipe.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_KvPut{KvPut: req}})
	if err != nil {
		return nil, err
	}
	return r.GetKvPut(), nil
}
