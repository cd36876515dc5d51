package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// ErrStaleGeneration reports a count-down to a latch generation that a
// reset replaced: it was rejected and changed nothing (docs/latch.md).
var ErrStaleGeneration = errors.New("client: latch generation was replaced")

// Latch is one generation of a countdown latch.
type Latch struct {
	Name string
	// Generation names this generation; CountDown and Wait take it.
	Generation uint64
	// Count is what is left to count down; Initial what it started with.
	Count, Initial uint64
	// CreatedAt is the leader's clock when the generation started.
	CreatedAt time.Time
}

func latchOf(p *fencedv1.LatchInfo) Latch {
	return Latch{Name: p.GetName(), Generation: p.GetGeneration(), Count: p.GetCount(), Initial: p.GetInitial(), CreatedAt: time.UnixMilli(p.GetCreatedAtUnixMs())}
}

// CountDownResult is what a count-down did.
type CountDownResult string

// Count-down results.
const (
	// Counted: the count went down by one and is still above zero.
	Counted CountDownResult = "counted"
	// Completed: this count-down brought the count to zero.
	Completed CountDownResult = "completed"
	// AlreadyComplete: the generation was at zero already; a no-op.
	AlreadyComplete CountDownResult = "already_complete"
	// StaleGeneration: the generation was replaced; rejected (the error is
	// ErrStaleGeneration).
	StaleGeneration CountDownResult = "stale_generation"
)

func (c *Client) latches(ep *endpoint) fencedv1connect.LatchServiceClient {
	return fencedv1connect.NewLatchServiceClient(c.httpClient, ep.url)
}

// LatchCreate starts a new generation of the latch name with count (0 to
// the server's --max-latch-count): it creates the latch, or replaces its
// current generation (a reset; waiters of that generation are told it was
// replaced and its count-downs are rejected from now on). It starts one
// generation however often the SDK retries it (one request id for all its
// attempts), unless another create came in between.
func (c *Client) LatchCreate(ctx context.Context, name string, count uint64) (Latch, error) {
	if err := fence.ValidateName(name); err != nil {
		return Latch{}, err
	}
	id := newRequestID()
	var out Latch
	err := c.retry(ctx, "latch create", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := c.latches(ep).Create(ctx, connect.NewRequest(&fencedv1.LatchCreateRequest{Name: name, Count: count, RequestId: id}))
		if err == nil {
			out = latchOf(r.Msg.GetLatch())
		}
		return err
	})
	return out, err
}

// LatchCountDown counts generation of the latch name down by one. It
// counts once however often the SDK retries it (it carries one request id
// for all its attempts). A generation already at zero answers
// AlreadyComplete (a no-op, no error); a replaced one StaleGeneration with
// ErrStaleGeneration (rejected). The Latch is the latch's current
// generation after the call.
func (c *Client) LatchCountDown(ctx context.Context, name string, generation uint64) (CountDownResult, Latch, error) {
	if err := fence.ValidateName(name); err != nil {
		return "", Latch{}, err
	}
	id := newRequestID()
	var res CountDownResult
	var out Latch
	err := c.retry(ctx, "latch count down", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := c.latches(ep).CountDown(ctx, connect.NewRequest(&fencedv1.LatchCountDownRequest{Name: name, Generation: generation, RequestId: id}))
		if err != nil {
			return err
		}
		out = latchOf(r.Msg.GetLatch())
		switch r.Msg.GetResult() {
		case fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_COUNTED:
			res = Counted
		case fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_COMPLETED:
			res = Completed
		case fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_DUPLICATE:
			// Our own earlier attempt counted: report what it did.
			res = Counted
			if out.Generation == generation && out.Count == 0 {
				res = Completed
			}
		case fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_ALREADY_COMPLETE:
			res = AlreadyComplete
		case fencedv1.LatchCountDownResult_LATCH_COUNT_DOWN_RESULT_STALE_GENERATION:
			res = StaleGeneration
		default:
			return fmt.Errorf("client: unknown count-down result %v", r.Msg.GetResult())
		}
		return nil
	})
	if err == nil && res == StaleGeneration {
		err = fmt.Errorf("%w: latch %q generation %d (current %d)", ErrStaleGeneration, name, generation, out.Generation)
	}
	return res, out, err
}

// latchWaitChunk bounds one wait call; LatchWait repeats it until ctx
// ends, so a wait can last as long as ctx.
const latchWaitChunk = time.Minute

// LatchWait blocks until generation of the latch name reaches zero (true)
// or a reset replaces it (false), or ctx ends (its error). The server
// pushes the answer when the count-down that reaches zero, or the reset,
// is applied; nothing polls.
func (c *Client) LatchWait(ctx context.Context, name string, generation uint64) (bool, error) {
	if err := fence.ValidateName(name); err != nil {
		return false, err
	}
	for {
		wait := latchWaitChunk
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, max(time.Until(d), 0))
		}
		var resp *fencedv1.LatchWaitResponse
		err := c.retry(ctx, "latch wait", c.requestTimeout+wait, func(ctx context.Context, ep *endpoint) error {
			r, err := c.latches(ep).Wait(ctx, connect.NewRequest(&fencedv1.LatchWaitRequest{Name: name, Generation: generation, WaitMs: wait.Milliseconds()}))
			if err == nil {
				resp = r.Msg
			}
			return err
		})
		switch {
		case err != nil:
			return false, err
		case resp.GetCompleted():
			return true, nil
		case resp.GetReplaced():
			return false, nil
		case ctx.Err() != nil:
			return false, context.Cause(ctx)
		}
	}
}

// LatchJoin returns the latch's current generation and count.
func (c *Client) LatchJoin(ctx context.Context, name string) (Latch, error) {
	if err := fence.ValidateName(name); err != nil {
		return Latch{}, err
	}
	var out Latch
	err := c.retry(ctx, "latch join", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := c.latches(ep).Join(ctx, connect.NewRequest(&fencedv1.LatchJoinRequest{Name: name}))
		if err == nil {
			out = latchOf(r.Msg.GetLatch())
		}
		return err
	})
	return out, err
}
