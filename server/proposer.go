package server

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
	"google.golang.org/protobuf/proto"
)

// Limits of one batch entry.
const (
	maxBatchCommands = 512
	maxBatchBytes    = 2 << 20
)

// proposer groups the commands proposed at the same moment into one Raft
// entry (a statev1.Batch): one log entry, one commit and one future for
// all of them instead of one each. The first proposer to find the queue
// empty yields once so that concurrent proposers can join, then takes the
// queue and commits it on a goroutine of its own; whoever proposes
// meanwhile starts the next batch. A lone command is proposed as itself.
type proposer struct {
	s     *Server
	mu    sync.Mutex
	queue []*proposal
}

// proposal is one command waiting for its batch to commit.
type proposal struct {
	cmd  *statev1.Command
	size int
	done chan proposalResult // capacity 1
}

type proposalResult struct {
	res fsm.Result
	err error
}

// propose commits cmd in the next batch and returns its result. If ctx
// ends first the command may still be committed with its batch: the error
// then wraps raftstore.ErrOutcomeUnknown.
func (p *proposer) propose(ctx context.Context, cmd *statev1.Command) (fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, fmt.Errorf("propose: %w; the command was not proposed", err)
	}
	size := proto.Size(cmd)
	pr := &proposal{cmd: cmd, size: size, done: make(chan proposalResult, 1)}
	p.mu.Lock()
	p.queue = append(p.queue, pr)
	lead := len(p.queue) == 1
	p.mu.Unlock()
	if lead {
		runtime.Gosched()
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		p.mu.Unlock()
		go p.commit(batch)
	}
	select {
	case r := <-pr.done:
		return r.res, r.err
	case <-ctx.Done():
		return fsm.Result{}, fmt.Errorf("propose: %w: %w before the command was seen to commit; it may or may not be applied", raftstore.ErrOutcomeUnknown, ctx.Err())
	}
}

// commit proposes the batch, in entries within the batch limits, one after
// the other, and hands each command its result.
func (p *proposer) commit(batch []*proposal) {
	for len(batch) > 0 {
		n, bytes := 0, 0
		for n < len(batch) && n < maxBatchCommands && (n == 0 || bytes+batch[n].size <= maxBatchBytes) {
			bytes += batch[n].size
			n++
		}
		p.commitEntry(batch[:n])
		batch = batch[n:]
	}
}

// commitEntry proposes one entry holding the commands of part.
func (p *proposer) commitEntry(part []*proposal) {
	s := p.s
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ProposeTimeout)
	defer cancel()
	cmd := part[0].cmd
	if len(part) > 1 {
		cmds := make([]*statev1.Command, len(part))
		for i, pr := range part {
			cmds[i] = pr.cmd
		}
		cmd = &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: cmds}}}
	}
	results, err := p.apply(ctx, cmd, len(part))
	for i, pr := range part {
		if err != nil {
			pr.done <- proposalResult{err: err}
			continue
		}
		pr.done <- proposalResult{res: results[i], err: results[i].Err}
	}
}

// apply commits one entry and returns the results of its n commands.
func (p *proposer) apply(ctx context.Context, cmd *statev1.Command, n int) ([]fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	resp, err := p.s.node.Apply(ctx, data)
	if err != nil {
		return nil, err
	}
	switch r := resp.(type) {
	case fsm.Result:
		if n == 1 {
			return []fsm.Result{r}, nil
		}
		if r.Err != nil {
			return nil, r.Err
		}
	case batchResults:
		if len(r) == n {
			return r, nil
		}
	}
	return nil, fmt.Errorf("unexpected apply response %T for %d commands", resp, n)
}

// batchResults is what the state machine returns for a Batch entry: one
// result per command, in order.
type batchResults []fsm.Result
