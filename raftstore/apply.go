package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	fence "github.com/fenced-dev/fenced"
)

// apply hands one encoded entry to raft and waits until it is committed and
// applied to this node's state machine, then returns the fsmAdapter's
// response for it. Its errors say what Propose's say.
func (n *Node) apply(ctx context.Context, entry []byte) (resp any, err error) {
	if n.cfg.OnApply != nil {
		start := time.Now()
		defer func() { n.cfg.OnApply(time.Since(start), err) }()
	}
	f, err := n.await(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.Apply(entry, timeout)
	})
	if err != nil {
		return nil, n.proposalError("apply", err)
	}
	return f.(raft.ApplyFuture).Response(), nil
}

// Barrier waits until every entry committed before it is applied to this
// node's state machine. A new leader uses it before acting on its state.
// It works on the leader only; elsewhere it fails with an error wrapping
// fence.ErrNotLeader. Cancelling ctx stops the wait, not the barrier.
func (n *Node) Barrier(ctx context.Context) error {
	_, err := n.await(ctx, func(timeout time.Duration) raft.Future {
		return n.raft.Barrier(timeout)
	})
	if err != nil {
		return n.checkError("barrier", err)
	}
	return nil
}

// VerifyLeader checks with a majority of the cluster that this node is still
// the leader, so that a read served after it is not stale. It fails with an
// error wrapping fence.ErrNotLeader when the node is not, or is no longer,
// the leader. Cancelling ctx stops the wait.
func (n *Node) VerifyLeader(ctx context.Context) error {
	_, err := n.await(ctx, func(time.Duration) raft.Future {
		return n.raft.VerifyLeader()
	})
	if err != nil {
		return n.checkError("verify leader", err)
	}
	return nil
}

// errWaitEnded marks an error from await that ended the wait after the
// operation was started; the operation's fate is unknown.
type errWaitEnded struct{ err error }

func (e *errWaitEnded) Error() string { return e.err.Error() }
func (e *errWaitEnded) Unwrap() error { return e.err }

// errNotStarted marks an error from await returned before the operation was
// handed to raft.
type errNotStarted struct{ err error }

func (e *errNotStarted) Error() string { return e.err.Error() }
func (e *errNotStarted) Unwrap() error { return e.err }

// await starts an operation with start, which receives the time left until
// ctx's deadline (0 for none), and waits until raft resolves its future, ctx
// ends or the node shuts down. It returns the resolved future and its error.
//
// The future is resolved on a separate goroutine so that ctx can interrupt
// the wait. Raft resolves every future it accepted (committed, leadership
// lost, shut down), except commands already queued for the state machine
// when it shuts down; their goroutine stays blocked for the life of the
// process, which only happens around Shutdown.
func (n *Node) await(ctx context.Context, start func(timeout time.Duration) raft.Future) (raft.Future, error) {
	n.mu.Lock()
	if n.closing {
		n.mu.Unlock()
		return nil, &errNotStarted{ErrShutdown}
	}
	n.inflight.Add(1)
	n.mu.Unlock()
	defer n.inflight.Done()

	if err := ctx.Err(); err != nil {
		return nil, &errNotStarted{err}
	}
	var timeout time.Duration
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
		if timeout <= 0 {
			return nil, &errNotStarted{context.DeadlineExceeded}
		}
	}

	resolved := make(chan raft.Future, 1)
	go func() {
		f := start(timeout)
		_ = f.Error()
		resolved <- f
	}()
	select {
	case f := <-resolved:
		return f, f.Error()
	case <-ctx.Done():
		return nil, &errWaitEnded{ctx.Err()}
	case <-n.done:
		return nil, &errWaitEnded{ErrShutdown}
	}
}

// proposalError turns an error of a proposal (an entry or a membership
// change) into one that says whether it may have been applied.
func (n *Node) proposalError(op string, err error) error {
	var notStarted *errNotStarted
	var waitEnded *errWaitEnded
	switch {
	case errors.As(err, &notStarted):
		return fmt.Errorf("%s: %w; the command was not proposed", op, notStarted.err)
	case errors.As(err, &waitEnded):
		return fmt.Errorf("%s: %w: %w before the command was seen to commit; it may or may not be applied", op, ErrOutcomeUnknown, waitEnded.err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%s: %w", op, n.notLeaderError(err))
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%s: %w: raft did not accept the command before the deadline; it was not proposed", op, context.DeadlineExceeded)
	case errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%s: %w; a snapshot restore discarded the command, it was not applied", op, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%s: %w: %w while the command was pending; it may or may not be applied", op, ErrOutcomeUnknown, ErrShutdown)
	default:
		// raft.ErrLeadershipLost, a log store failure, anything new: the
		// command may have reached other nodes' logs.
		return fmt.Errorf("%s: %w: %w; the command may or may not be applied", op, ErrOutcomeUnknown, err)
	}
}

// checkError turns an error of Barrier or VerifyLeader, which change no
// state, into one that says what to do.
func (n *Node) checkError(op string, err error) error {
	var notStarted *errNotStarted
	var waitEnded *errWaitEnded
	switch {
	case errors.As(err, &notStarted):
		return fmt.Errorf("%s: %w", op, notStarted.err)
	case errors.As(err, &waitEnded):
		return fmt.Errorf("%s: %w", op, waitEnded.err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%s: %w", op, n.notLeaderError(err))
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%s: %w: raft did not accept the request before the deadline", op, context.DeadlineExceeded)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%s: %w", op, ErrShutdown)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// notLeaderError wraps fence.ErrNotLeader with who the leader is.
func (n *Node) notLeaderError(cause error) error {
	id, addr := n.Leader()
	if id == "" && addr == "" {
		return fmt.Errorf("%w: node %s is not the leader and knows no leader yet (%v); retry after an election", fence.ErrNotLeader, n.cfg.NodeID, cause)
	}
	return fmt.Errorf("%w: node %s is not the leader (%v); the leader is %s at %s", fence.ErrNotLeader, n.cfg.NodeID, cause, id, addr)
}
