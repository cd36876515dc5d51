package raftstore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Limits of one entry of commands proposed together.
const (
	maxBatchCommands = 512
	maxBatchBytes    = 2 << 20
)

// nextEntryYields is how many times a committer that just handed out an
// entry's results yields its processor (runtime.Gosched) before it takes
// the queue for the next entry. The callers it woke then run first and
// send their answers, and the calls those answers let clients send join
// the next entry instead of one after it: under load entries carry more
// commands (64 independent clients, 1 node: from about 18 an entry to
// 24) for the same fsyncs. With nothing else runnable a yield returns at
// once. Three was measured against 1, 6 and 12 (docs/benchmarks.md); one
// gained less, probably because the other processor picks the committer
// up from the global run queue before the callers have run (not traced).
const nextEntryYields = 3

// proposer groups the commands proposed at the same moment into one Raft
// entry (group commit): one log entry, one commit and one future for all
// of them instead of one each. The first proposer to find the queue empty
// yields once so that concurrent proposers can join, then takes the queue
// and commits it on a goroutine of its own; whoever proposes meanwhile
// starts the next batch. A lone command is proposed as itself.
//
// At most window batches are being committed at once (Config.
// MaxEntriesInFlight; 0: no limit). While the window is full, proposals
// wait in the queue, and the first committer to finish takes them all as
// its next batch: under load each entry carries more commands, so the
// cluster writes, fsyncs, replicates and acknowledges fewer entries for
// the same commands, on every member.
type proposer struct {
	window int // 0: no limit

	mu       sync.Mutex
	queue    []*proposal
	inflight int // batches being gathered or committed
}

// proposal is one command waiting for its entry to commit.
type proposal struct {
	ctx context.Context
	// deadline bounds the proposal beside ctx (ProposeWithin; zero:
	// only ctx's). It is the earlier of the two when both are set.
	deadline time.Time
	cmd      any
	size     int
	done     chan proposalResult // capacity 1
}

// expired reports whether the proposal's caller gave up: its context
// ended or its deadline passed (now, read once for a batch).
func (pr *proposal) expired(now time.Time) error {
	if err := pr.ctx.Err(); err != nil {
		return err
	}
	if !pr.deadline.IsZero() && !now.Before(pr.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// proposals keeps the proposals whose caller took its result, for the
// next Propose: the proposal and its channel are then not allocated per
// command. One whose caller gave up is not put back (its committer may
// still send on its channel).
var proposals = sync.Pool{New: func() any { return &proposal{done: make(chan proposalResult, 1)} }}

// timers keeps the stopped timers of ProposeWithin for reuse: a proposal
// with a timeout then costs no timer and no context of its own.
var timers sync.Pool

// startTimer returns a stopped timer from timers, reset to fire after d,
// or a new one.
func startTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// stopTimer stops t and keeps it for the next startTimer. Since Go 1.23
// a stopped timer's channel holds no stale value, so a reset one fires
// only for its new duration.
func stopTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

type proposalResult struct {
	res any
	err error
}

// Propose proposes cmd to the Raft group, in one entry with the commands
// proposed at the same moment, and waits until the entry is committed and
// applied to this node's state machine. It returns the Result the state
// machine set for cmd: a value of type error there is the command's
// outcome, not Propose's error, since the command was committed and
// applied.
//
// Only the leader accepts commands: on a follower or candidate Propose
// fails with an error wrapping fence.ErrNotLeader that names the leader, if
// known. Followers reject writes; they do not forward them to the leader.
//
// The context bounds the wait; the entry itself is waited for as long as
// the longest deadline of its commands (without a deadline, until raft
// resolves it). What the error says about the command:
//
//   - wraps fence.ErrNotLeader, or ErrShutdown alone, or the context ended
//     before the command was handed to raft: it was not applied.
//   - wraps ErrOutcomeUnknown: it was handed to raft and then leadership was
//     lost, the node shut down, or the context ended (the error then wraps
//     ctx.Err() too) before the commit was observed. It may or may not have
//     been applied, and a later leader may still apply it.
func (n *Node) Propose(ctx context.Context, cmd any) (any, error) {
	return n.propose(ctx, cmd, 0)
}

// ProposeWithin is Propose bounded by timeout when ctx has no deadline,
// as Propose with a context.WithTimeout of ctx would be, and answers the
// same: past timeout the error wraps context.DeadlineExceeded (and
// ErrOutcomeUnknown once the command was handed to raft). It makes no
// context and no timer of its own per call (a timer is reused from
// earlier calls), which in the profile of a lock cycle cost about 3 % of
// the server's CPU and 10 allocations.
func (n *Node) ProposeWithin(ctx context.Context, cmd any, timeout time.Duration) (any, error) {
	if _, ok := ctx.Deadline(); ok {
		timeout = 0
	}
	return n.propose(ctx, cmd, timeout)
}

// propose is Propose bounded by timeout as well when timeout > 0.
func (n *Node) propose(ctx context.Context, cmd any, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("propose: %w; the command was not proposed", err)
	}
	pr := proposals.Get().(*proposal)
	pr.ctx, pr.cmd, pr.size = ctx, cmd, n.sm.Size(cmd)
	var expired <-chan time.Time
	if timeout > 0 {
		t := startTimer(timeout)
		defer stopTimer(t)
		expired = t.C
		pr.deadline = time.Now().Add(timeout)
	}
	p := &n.proposer
	p.mu.Lock()
	p.queue = append(p.queue, pr)
	lead := len(p.queue) == 1 && (p.window == 0 || p.inflight < p.window)
	if lead {
		p.inflight++
	}
	p.mu.Unlock()
	if lead {
		runtime.Gosched()
		if batch := p.take(); batch != nil {
			go n.commit(batch)
		}
	}
	select {
	case r := <-pr.done:
		*pr = proposal{done: pr.done}
		proposals.Put(pr)
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("propose: %w: %w before the command was seen to commit; it may or may not be applied", ErrOutcomeUnknown, ctx.Err())
	case <-expired:
		return nil, fmt.Errorf("propose: %w: %w before the command was seen to commit; it may or may not be applied", ErrOutcomeUnknown, context.DeadlineExceeded)
	}
}

// take returns the queue for a holder of a place in the window to
// commit, or, when the queue is empty, gives the place back and returns
// nil.
func (p *proposer) take() []*proposal {
	p.mu.Lock()
	defer p.mu.Unlock()
	batch := p.queue
	p.queue = nil
	if len(batch) == 0 {
		p.inflight--
		return nil
	}
	return batch
}

// next returns the queue for the committer that just finished a batch to
// commit next, or nil when it is done: always without a window (each
// batch then has a committer of its own). It first yields
// nextEntryYields times.
func (p *proposer) next() []*proposal {
	if p.window == 0 {
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
		return nil
	}
	for range nextEntryYields {
		runtime.Gosched()
	}
	return p.take()
}

// commit proposes the batch, in entries within the batch limits, one after
// the other, and hands each command its result; then it commits what
// queued meanwhile, until the queue is empty.
func (n *Node) commit(batch []*proposal) {
	for ; batch != nil; batch = n.proposer.next() {
		batch = dropAbandoned(batch)
		for len(batch) > 0 {
			k, bytes := 0, 0
			for k < len(batch) && k < maxBatchCommands && (k == 0 || bytes+batch[k].size <= maxBatchBytes) {
				bytes += batch[k].size
				k++
			}
			n.commitEntry(batch[:k])
			batch = batch[k:]
		}
	}
}

// dropAbandoned answers, without proposing them, the commands whose
// caller's context ended or deadline passed while they waited in the
// queue (each caller has returned or is returning; the command was never
// handed to raft, so it is not applied), and returns the rest in their
// order.
func dropAbandoned(batch []*proposal) []*proposal {
	live := batch[:0]
	now := time.Now()
	for _, pr := range batch {
		if err := pr.expired(now); err != nil {
			pr.done <- proposalResult{err: fmt.Errorf("propose: %w; the command was not proposed", err)}
			continue
		}
		live = append(live, pr)
	}
	return live
}

// commitEntry proposes one entry holding the commands of part.
func (n *Node) commitEntry(part []*proposal) {
	ctx := context.Background()
	var deadline time.Time
	for _, pr := range part {
		d, ok := pr.deadline, !pr.deadline.IsZero()
		if !ok {
			d, ok = pr.ctx.Deadline()
		}
		if !ok {
			deadline = time.Time{}
			break
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	results, err := n.proposeEntry(ctx, part)
	if rp, ok := n.sm.(ResultPreparer); ok && err == nil {
		rp.PrepareResults(results)
	}
	for i, pr := range part {
		if err != nil {
			pr.done <- proposalResult{err: err}
			continue
		}
		pr.done <- proposalResult{res: results[i]}
	}
}

// proposeEntry commits one entry and returns the results of its commands.
func (n *Node) proposeEntry(ctx context.Context, part []*proposal) ([]any, error) {
	cmds := make([]any, len(part))
	for i, pr := range part {
		cmds[i] = pr.cmd
	}
	data, err := n.sm.Encode(cmds)
	if err != nil {
		return nil, fmt.Errorf("propose: %w; the command was not proposed", err)
	}
	if rt, ok := n.sm.(RoundTripCodec); ok && rt.RoundTrips(cmds) {
		n.fsm.proposed.add(data, cmds)
		defer n.fsm.proposed.remove(data) // taken when applied; else decoded if ever applied
	}
	resp, err := n.apply(ctx, data)
	if err != nil {
		return nil, err
	}
	switch r := resp.(type) {
	case entryError:
		return nil, r.err
	case batchResults:
		if len(r) == len(part) {
			return r, nil
		}
	default:
		if len(part) == 1 {
			return []any{resp}, nil // not in cmds, the entry's commands
		}
	}
	return nil, fmt.Errorf("propose: unexpected response %T for %d commands", resp, len(part))
}
