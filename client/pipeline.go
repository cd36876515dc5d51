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
	stream *lazyStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]
	cancel context.CancelFunc
	signal chan struct{} // capacity 1: calls or cancels to send
	done   chan struct{} // closed when the stream failed
	err    error         // why, once done is closed
	once   sync.Once
	// opened is when the stream was opened; lastRecv is when the last
	// message arrived, as nanoseconds since opened (monotonic).
	opened   time.Time
	lastRecv atomic.Int64
	// probing is set while a probe of the stream is in flight (suspect).
	probing atomic.Bool
	// takes has bit 1<<k for each PipelineCallKind k the server's Pipeline
	// takes, as its first response named them; told is set once that
	// response arrived (a server that names none takes lock and kv calls).
	takes atomic.Uint32
	told  atomic.Bool
	// direct is set once the stream's first message went out on a stream
	// whose sends callers may make themselves (native): a call then sends
	// itself and those queued with it (flush) when no send is under way,
	// instead of handing them to sendLoop.
	direct atomic.Bool

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]waiter
	// expiry fires at expiryAt, the earliest deadline of the waiting
	// calls (zero: not armed): one timer for all calls instead of one each.
	expiry   *time.Timer
	expiryAt time.Time
	calls    []*fencedv1.PipelineCall
	cancels  []uint64
	flushing bool // a flush is sending: calls queued meanwhile are its
	spare    []*fencedv1.PipelineCall

	req fencedv1.PipelineRequest // the flusher's (only while flushing)
}

// waiter is a call waiting for its answer: the channel the answer goes
// to, and the deadline of its attempt (zero: none), at which expire sends
// it expired instead.
type waiter struct {
	answer   chan *fencedv1.PipelineResult
	deadline time.Time
}

// answers are the answer channels of calls that ended, for reuse: one is
// put back only once it is out of waiting and empty, so that nothing more
// is ever sent to it.
var answers = sync.Pool{New: func() any { return make(chan *fencedv1.PipelineResult, 1) }}

// expired is sent to a call whose attempt's deadline passed.
var expired = new(fencedv1.PipelineResult)

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

// call sends one call on st and waits for its answer (pipeline.call). The
// deadline of an attempt's context (attemptCtx) is kept by the stream's
// one timer (expire), not by a timer of the call's.
func (st *pipeStream) call(ctx context.Context, call *fencedv1.PipelineCall) (*fencedv1.PipelineResult, error) {
	answer := answers.Get().(chan *fencedv1.PipelineResult)
	done, deadline := attemptOf(ctx)
	sent := time.Now()
	st.mu.Lock()
	st.nextID++
	id := st.nextID
	call.Id = id
	st.waiting[id] = waiter{answer: answer, deadline: deadline}
	if !deadline.IsZero() && (st.expiryAt.IsZero() || deadline.Before(st.expiryAt)) {
		st.armExpiryLocked(deadline, sent)
	}
	st.calls = append(st.calls, call)
	self := st.direct.Load() && !st.flushing
	if self {
		st.flushing = true
	}
	// Other calls in flight: their answers come several to a message and
	// the reader hands them out one after another, so the callers woken
	// with this one are about to queue their next calls. Yielding once
	// lets them, and the calls go out in one write instead of one each
	// (the server's pipeline.flush does the same with its answers; with
	// 64 lockers on one client the SDK's writes went from about 1.57 to
	// 0.32 a lock cycle, docs/benchmarks.md). A call alone in flight, as
	// an independent client's, never yields.
	yield := self && len(st.waiting) > 1
	st.mu.Unlock()
	if self {
		if yield {
			runtime.Gosched()
		}
		st.flush(selfFlushRounds)
	} else {
		st.poke()
	}

	var err error
	timedOut := false
	select {
	case r := <-answer:
		if r != expired {
			// Taken out of waiting by its sender: nothing more comes.
			answers.Put(answer)
			if e := r.GetError(); e != nil {
				return nil, pipelineError(e)
			}
			return r, nil
		}
		err, timedOut = context.DeadlineExceeded, true
	case <-st.done:
		// Still in waiting, maybe: answer is not reused.
		return nil, connect.NewError(connect.CodeUnavailable, st.err)
	case <-done:
		err = ctx.Err()
	}
	st.mu.Lock()
	unsent := st.unqueue(call)
	// pending: the server may still be working on the call, which is then
	// cancelled there. A call out of waiting was answered or expired: the
	// one who took it out sent that to answer under st.mu.
	pending := timedOut
	if _, ok := st.waiting[id]; ok {
		delete(st.waiting, id)
		pending = true
	} else if !timedOut {
		select {
		case r := <-answer:
			pending = r == expired // else the answer came meanwhile: dropped
		default:
		}
	}
	if pending && !unsent {
		st.cancels = append(st.cancels, id)
	}
	alone := len(st.waiting) == 0
	st.mu.Unlock()
	// Out of waiting and emptied: nothing more comes to answer.
	answers.Put(answer)
	if unsent {
		return nil, ctxError(err, true)
	}
	st.poke()
	if errors.Is(err, context.DeadlineExceeded) && st.silentSince(sent) {
		st.suspect(sent, alone)
	}
	return nil, ctxError(err, false)
}

// armExpiryLocked sets the stream's timer to fire at at (now is about
// the time). Call with st.mu held.
func (st *pipeStream) armExpiryLocked(at, now time.Time) {
	st.expiryAt = at
	if st.expiry == nil {
		st.expiry = time.AfterFunc(at.Sub(now), st.expire)
	} else {
		st.expiry.Reset(at.Sub(now))
	}
}

// expire sends expired to every waiting call whose deadline has passed,
// taking it out of waiting, and sets the timer to the earliest deadline
// left.
func (st *pipeStream) expire() {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	var next time.Time
	for id, w := range st.waiting {
		switch {
		case w.deadline.IsZero():
		case !now.Before(w.deadline):
			delete(st.waiting, id)
			w.answer <- expired
		case next.IsZero() || w.deadline.Before(next):
			next = w.deadline
		}
	}
	st.expiryAt = time.Time{}
	if !next.IsZero() {
		st.armExpiryLocked(next, now)
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
		waiting: make(map[uint64]waiter),
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

// selfFlushRounds is how many messages a call that sends itself (flush)
// sends at most before it leaves the calls queued since to sendLoop: the
// calls that arrived while it wrote go out together in its next message,
// but a caller is not kept sending for others for long.
const selfFlushRounds = 2

// sendLoop sends the queued calls and cancellations, all those queued
// since the last send in one message, unless a call is sending them
// itself (flush).
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
	if st.stream.direct() {
		st.direct.Store(true)
	}
	for {
		select {
		case <-st.signal:
		case <-st.done:
			return
		}
		if !st.direct.Load() {
			// Let the goroutines about to queue calls do so first: calls
			// come in bursts, and one message for the burst costs one
			// write.
			runtime.Gosched()
		}
		st.mu.Lock()
		busy := st.flushing
		st.flushing = true
		st.mu.Unlock()
		if !busy {
			st.flush(-1)
		}
	}
}

// flush sends the queued calls and cancellations, those queued since in
// the next message, until none are left or it sent rounds messages
// (rounds < 0: no bound), when it pokes sendLoop to go on. Call it only
// after setting st.flushing under st.mu; it clears it. A failed send fails
// the stream.
func (st *pipeStream) flush(rounds int) {
	for n := 0; ; n++ {
		st.mu.Lock()
		calls, cancels := st.calls, st.cancels
		if len(calls) == 0 && len(cancels) == 0 || n == rounds {
			st.flushing = false
			st.mu.Unlock()
			if n == rounds && len(calls)+len(cancels) > 0 {
				st.poke()
			}
			return
		}
		// The queue's next array is the one the last message was sent
		// from, now that nothing refers to its calls any more.
		st.calls, st.cancels, st.spare = st.spare[:0], nil, nil
		st.mu.Unlock()
		var err error
		if len(calls) <= 1 {
			// One call (each of many independent clients has one in
			// flight) goes alone, whatever its size: no sizing, and the
			// flusher's own message (one flush at a time) is reused.
			st.req.Calls, st.req.Cancel = append(st.req.Calls[:0], calls...), cancels
			err = st.stream.Send(&st.req)
			clear(st.req.Calls)
			st.req.Cancel = nil
		} else {
			for _, req := range pipelineMessages(calls, cancels) {
				if err = st.stream.Send(req); err != nil {
					break
				}
			}
		}
		if err != nil {
			st.mu.Lock()
			st.flushing = false
			st.mu.Unlock()
			st.fail(fmt.Errorf("pipeline send: %w", err))
			return
		}
		clear(calls)
		st.mu.Lock()
		if st.spare == nil {
			st.spare = calls[:0]
		}
		st.mu.Unlock()
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

// recvLoop hands each answer to the call waiting for it. On a native
// stream the connection's reader does so itself (receiveEach), and
// recvLoop only waits for the stream's end.
func (st *pipeStream) recvLoop() {
	defer st.stream.CloseResponse()
	if err, ok := st.stream.receiveEach(st.received); ok {
		st.fail(fmt.Errorf("pipeline receive: %w", err))
		return
	}
	for {
		resp, err := st.stream.Receive()
		if err != nil {
			st.fail(fmt.Errorf("pipeline receive: %w", err))
			return
		}
		st.received(resp)
	}
}

// received hands the answers of resp to the calls waiting for them. It
// never blocks (each call's answer channel has room for its one answer)
// and keeps nothing of resp but its results (a native stream reuses resp
// and its slice for the next frame).
func (st *pipeStream) received(resp *fencedv1.PipelineResponse) {
	st.lastRecv.Store(int64(time.Since(st.opened)))
	if !st.told.Load() {
		st.told.Store(true)
		st.learn(resp.GetCalls())
	}
	st.mu.Lock()
	for _, r := range resp.GetResults() {
		if w, ok := st.waiting[r.GetId()]; ok {
			delete(st.waiting, r.GetId())
			w.answer <- r
		}
	}
	st.mu.Unlock()
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
