package raftstore

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Leader leases (Config.LeaseReads): a leader that a quorum heard from
// recently serves reads without asking the quorum again.
//
// Why it holds, in hashicorp/raft v1.8.0 (raft.go, replication.go): a
// follower that accepted an AppendEntries refuses votes and pre-votes
// ("rejecting vote request since we have a leader") until its heartbeat
// timer finds no contact for HeartbeatTimeout, measured on its own
// monotonic clock from the end of the last AppendEntries it accepted; a
// leader refuses votes while it leads. A new leader needs the votes of a
// quorum, and every quorum holds a member that accepted an AppendEntries
// of this leader sent at time s or later, where s is the send time this
// node records for the quorum's oldest acknowledgement. So no new leader
// exists, and nothing is committed past this leader, before s +
// HeartbeatTimeout as that member's clock counts it. The lease ends
// earlier, at s + HeartbeatTimeout / (1 + LeaseClockDrift) on this node's
// clock, which covers clocks whose rates differ by up to LeaseClockDrift.
//
// The send time is taken by this node, before the request leaves, on the
// boot-time clock (leaseclock_*.go), which also counts time this process
// spent stopped or the machine spent suspended. The time of the response
// would be too late: raft's VerifyLeader counts an answer to a heartbeat
// that was already on its way when it was called.
//
// Two ways around a follower's refusal are closed here: a member that
// restarted knows no leader and would vote at once, so with LeaseReads a
// node refuses votes for HeartbeatTimeout after it starts (voteHold); and a
// leadership transfer makes the target's voters ignore their leader, so a
// node gives up its lease for the rest of its term before it starts one.

// leaseTracker records, for each peer, the send time of the latest
// AppendEntries of the current term the peer accepted. Every node keeps
// one: ConfirmLeader (confirm.go) waits on it, and with Config.LeaseReads
// the leader lease is measured from it.
type leaseTracker struct {
	// duration is how long after the quorum's oldest send time the lease
	// lasts: HeartbeatTimeout / (1 + LeaseClockDrift).
	duration time.Duration
	// unchecked, in a test build, holds the lease whenever this node leads
	// (a negative control; see TestHooks).
	unchecked bool

	mu   sync.Mutex
	term uint64
	sent map[raft.ServerID]time.Duration // on leaseClock
	// revoked is a term in which this node started a leadership transfer:
	// it holds no lease in that term.
	revoked uint64

	// changed is closed and replaced at every acknowledgement recorded.
	changed chan struct{}

	// served and fellBack count the reads served on the lease and those
	// that asked the quorum instead.
	served, fellBack atomic.Uint64
}

func newLeaseTracker(c Config) *leaseTracker {
	return &leaseTracker{
		duration:  time.Duration(float64(c.HeartbeatTimeout) / (1 + c.LeaseClockDrift)),
		unchecked: c.Test.uncheckedLease(),
		sent:      map[raft.ServerID]time.Duration{},
		changed:   make(chan struct{}),
	}
}

// ack records that peer accepted an AppendEntries of term sent at sent.
func (t *leaseTracker) ack(peer raft.ServerID, term uint64, sent time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if term < t.term {
		return
	}
	if term > t.term {
		t.term = term
		clear(t.sent)
	}
	if sent > t.sent[peer] {
		t.sent[peer] = sent
		if t.changed != nil {
			close(t.changed)
		}
		t.changed = make(chan struct{})
	}
}

// acked reports whether need of others accepted an AppendEntries of term
// sent after since, and returns a channel closed at the next
// acknowledgement recorded.
func (t *leaseTracker) acked(term uint64, others []raft.ServerID, need int, since time.Duration) (bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	if term != t.term {
		return false, t.changed
	}
	n := 0
	for _, id := range others {
		if s, ok := t.sent[id]; ok && s > since {
			n++
		}
	}
	return n >= need, t.changed
}

// revoke gives up the lease of term for good.
func (t *leaseTracker) revoke(term uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if term > t.revoked {
		t.revoked = term
	}
}

// valid reports whether a leader of term, with voters as the other voting
// members (self excluded) and needing quorum acknowledgements besides its
// own vote, holds the lease at now.
func (t *leaseTracker) valid(term uint64, others []raft.ServerID, need int, now time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if term == t.revoked {
		return false
	}
	if t.unchecked {
		return true
	}
	if need <= 0 {
		return true
	}
	if term != t.term {
		return false
	}
	var sent []time.Duration
	for _, id := range others {
		if s, ok := t.sent[id]; ok {
			sent = append(sent, s)
		}
	}
	if len(sent) < need {
		return false
	}
	// The need-th most recent acknowledgement: a quorum heard from this
	// leader at or after it.
	slices.Sort(sent)
	oldest := sent[len(sent)-need]
	return now-oldest < t.duration
}

// leaseHeld reports whether this node leads and holds its leader lease now,
// so that a read of its state is linearizable without a quorum round trip
// (once the node has taken over: see ReadIndex). It is false without
// Config.LeaseReads.
func (n *Node) leaseHeld() bool {
	if n.lease == nil {
		return false
	}
	q, ok := n.quorum()
	if !ok {
		return false
	}
	ok = n.lease.valid(q.term, q.others, q.need, leaseClock())
	// Still the leader of the same term afterwards, so it led throughout.
	if after, still := n.leaderTerm(); !still || after != q.term {
		return false
	}
	return ok
}

// leaderQuorum is what a leader needs to hear from to know it still leads.
type leaderQuorum struct {
	term uint64
	// others are the other voting members; need is how many of them make
	// a quorum with this node's own vote.
	others []raft.ServerID
	need   int
}

// quorum returns this node's term and the voters it needs, or false when
// it does not lead or is not a voter itself (a leader removing itself).
func (n *Node) quorum() (leaderQuorum, bool) {
	term, ok := n.leaderTerm()
	if !ok {
		return leaderQuorum{}, false
	}
	self, q, voters := raft.ServerID(n.cfg.NodeID), leaderQuorum{term: term}, 0
	selfVotes := false
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return leaderQuorum{}, false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == self {
			selfVotes = true
			continue
		}
		q.others = append(q.others, s.ID)
	}
	if !selfVotes {
		return leaderQuorum{}, false
	}
	q.need = voters/2 + 1 - 1
	return q, true
}

// LeaseReads returns how many reads ReadIndex served on the leader lease
// and how many it served with a quorum round trip instead (the lease had
// run out, or this node has not held one yet in its term). Both are 0
// without Config.LeaseReads.
func (n *Node) LeaseReads() (lease, quorum uint64) {
	if n.lease == nil {
		return 0, 0
	}
	return n.lease.served.Load(), n.lease.fellBack.Load()
}

// voteHold refuses vote and pre-vote requests for HeartbeatTimeout after
// the node started, when lease reads are on: a restarted member knows no
// leader, and without the hold it would vote at once for a candidate while
// the leader it acknowledged before its restart still holds a lease.
type voteHold struct {
	until time.Duration // on leaseClock; 0: no hold
}

func (h voteHold) refuses(rpc raft.RPC) bool {
	if h.until == 0 {
		return false
	}
	switch rpc.Command.(type) {
	case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest:
		return leaseClock() < h.until
	}
	return false
}
