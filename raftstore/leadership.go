package raftstore

import "github.com/hashicorp/raft"

// Leadership is this node's view of its own leadership at one moment.
//
// Follow changes with a loop; no change is missed and any number of
// goroutines may follow at once:
//
//	for {
//		l := node.Leadership()
//		// act on l.Leader and l.Term
//		select {
//		case <-l.Changed:
//		case <-node.Done():
//			return
//		}
//	}
//
// Intermediate views may be skipped (lost and regained leadership shows as
// a new Term), but the latest view is always delivered.
type Leadership struct {
	// Leader reports whether this node is the leader.
	Leader bool

	// Term is the Raft term this node leads in, 0 when Leader is false. A
	// term has at most one leader, so it identifies this leadership: a
	// command stamped with it names its proposer's term. (The state machine
	// also receives the term of every command as Command.Term.)
	Term uint64

	// Changed is closed when this view is superseded. After Shutdown the
	// view is Leader false and Changed is never closed; watch Done.
	Changed <-chan struct{}
}

// Leadership returns the node's current view of its leadership.
//
// It is fed from raft's leadership notifications, which the node reads on a
// single goroutine, so it lags raft's own state by a scheduling delay: a
// leader may already have stepped down when the view still says Leader.
// That is harmless for writes, which raft rejects once leadership is lost,
// and it is why commands carry the term.
func (n *Node) Leadership() Leadership {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lead
}

// watchLeadership is the only reader of raft's NotifyCh (which raft blocks
// on until it is read) and of the leader observations (a blocking observer,
// likewise). It runs from Open until raft has shut down.
func (n *Node) watchLeadership(notify <-chan bool, observed <-chan raft.Observation) {
	defer close(n.watchDone)
	for {
		select {
		case isLeader := <-notify:
			if !isLeader {
				n.setLeadership(false, 0, false)
				continue
			}
			if term, ok := n.leaderTerm(); ok {
				n.setLeadership(true, term, false)
			}
			// Otherwise leadership already ended and its false is on the way.
		case <-observed:
			// Raft records the leader before it reports the change, so
			// reading it here never misses the latest one.
			n.setKnownLeader()
		case <-n.watchStop:
			return
		}
	}
}

// LeaderTerm returns the term this node leads in now, as raft knows it, or
// false when it is not the leader. Unlike Leadership, which lags raft by a
// scheduling delay, it reads raft's own state: a caller that must know it
// still leads in a term it acted on (a read served after that term's
// takeover) checks it here.
func (n *Node) LeaderTerm() (uint64, bool) { return n.leaderTerm() }

// leaderTerm returns the term this node leads in, or false when it is not
// the leader. Raft sets the term before it enters the leader state, and on
// step-down leaves the leader state before it moves to a later term; so a
// leader state seen between two reads of the same term belongs to that term.
func (n *Node) leaderTerm() (uint64, bool) {
	for {
		before := n.raft.CurrentTerm()
		leader := n.raft.State() == raft.Leader
		after := n.raft.CurrentTerm()
		if !leader {
			return 0, false
		}
		if before == after {
			return before, true
		}
	}
}

// setLeadership publishes a new view when it differs from the current one.
// final publishes the view after Shutdown, whose Changed never closes.
func (n *Node) setLeadership(leader bool, term uint64, final bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !final && n.lead.Leader == leader && n.lead.Term == term {
		return
	}
	close(n.leadChanged)
	n.leadChanged = make(chan struct{})
	n.lead = Leadership{Leader: leader, Term: term, Changed: n.leadChanged}
}

// KnownLeader is the leader this node knows of at one moment, itself
// included. Follow it like Leadership: act on ID, then wait on Changed.
type KnownLeader struct {
	// ID and Addr name the leader; both are empty when this node knows no
	// leader (an election is under way, or it is cut off).
	ID, Addr string

	// Changed is closed when this view is superseded. After Shutdown the
	// view is empty and Changed is never closed; watch Done.
	Changed <-chan struct{}
}

// KnownLeader returns the leader this node knows of now and a channel
// closed when that changes. It is fed by raft's leader observations.
func (n *Node) KnownLeader() KnownLeader {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.known
}

// setKnownLeader publishes raft's current leader when it differs from the
// view.
func (n *Node) setKnownLeader() {
	id, addr := n.Leader()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known.ID == id && n.known.Addr == addr {
		return
	}
	close(n.knownChanged)
	n.knownChanged = make(chan struct{})
	n.known = KnownLeader{ID: id, Addr: addr, Changed: n.knownChanged}
}

// endKnownLeader publishes the empty view after Shutdown, whose Changed
// never closes.
func (n *Node) endKnownLeader() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.knownChanged)
	n.knownChanged = make(chan struct{})
	n.known = KnownLeader{Changed: n.knownChanged}
}
