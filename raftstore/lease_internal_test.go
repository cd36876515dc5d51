package raftstore

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The lease counts the quorum's oldest acknowledgement, only of the term
// asked about, only from voters, and ends at duration after it; a revoked
// term holds none.
func TestLeaseTracker_Valid(t *testing.T) {
	tr := &leaseTracker{duration: 100 * time.Millisecond, sent: map[raft.ServerID]time.Duration{}}
	ms := time.Millisecond
	three := []raft.ServerID{"n2", "n3"}
	five := []raft.ServerID{"n2", "n3", "n4", "n5"}

	if tr.valid(5, three, 1, 10*ms) {
		t.Fatal("lease without any acknowledgement")
	}
	tr.ack("n2", 5, 10*ms)
	if !tr.valid(5, three, 1, 50*ms) {
		t.Error("3 nodes, n2 acknowledged 40ms ago: want a lease")
	}
	if tr.valid(5, three, 1, 110*ms) {
		t.Error("3 nodes, n2 acknowledged exactly the lease duration ago: want none")
	}
	if tr.valid(6, three, 1, 50*ms) {
		t.Error("an acknowledgement of term 5 gave a lease in term 6")
	}
	if tr.valid(5, []raft.ServerID{"n3"}, 1, 50*ms) {
		t.Error("an acknowledgement of n2 counted for a configuration without n2")
	}

	// Five nodes need two acknowledgements; the older one of the best two
	// counts.
	tr.ack("n3", 5, 30*ms)
	tr.ack("n4", 5, 80*ms)
	if !tr.valid(5, five, 2, 120*ms) {
		t.Error("5 nodes, n3 and n4 acknowledged at 30 and 80ms: want a lease at 120ms (from 30ms)")
	}
	if tr.valid(5, five, 2, 130*ms) {
		t.Error("5 nodes: the lease must run from the second most recent acknowledgement (30ms), so end at 130ms")
	}
	// An older send time never moves the lease back.
	tr.ack("n4", 5, 20*ms)
	if !tr.valid(5, five, 2, 120*ms) {
		t.Error("an older acknowledgement replaced a newer one")
	}

	// A new term forgets the old acknowledgements; an old one is ignored.
	tr.ack("n2", 6, 200*ms)
	tr.ack("n3", 5, 210*ms)
	if tr.valid(5, three, 1, 220*ms) {
		t.Error("term 5 still holds a lease after acknowledgements of term 6")
	}
	if !tr.valid(6, three, 1, 220*ms) {
		t.Error("term 6, n2 acknowledged 20ms ago: want a lease")
	}
	tr.revoke(6)
	if tr.valid(6, three, 1, 220*ms) {
		t.Error("a revoked term (leadership transfer) holds a lease")
	}

	// A single voter leads alone.
	if !(&leaseTracker{sent: map[raft.ServerID]time.Duration{}}).valid(1, nil, 0, time.Hour) {
		t.Error("a single-node cluster holds no lease")
	}
}

// The vote hold refuses votes and pre-votes, and only those, until it ends.
func TestVoteHold(t *testing.T) {
	h := voteHold{until: leaseClock() + time.Hour}
	for _, cmd := range []any{&raft.RequestVoteRequest{}, &raft.RequestPreVoteRequest{}} {
		if !h.refuses(raft.RPC{Command: cmd}) {
			t.Errorf("%T not refused during the hold", cmd)
		}
	}
	if h.refuses(raft.RPC{Command: &raft.AppendEntriesRequest{}}) {
		t.Error("AppendEntries refused during the hold")
	}
	over := voteHold{until: leaseClock() - time.Millisecond}
	if over.refuses(raft.RPC{Command: &raft.RequestVoteRequest{}}) {
		t.Error("vote refused after the hold")
	}
	if (voteHold{}).refuses(raft.RPC{Command: &raft.RequestVoteRequest{}}) {
		t.Error("vote refused without lease reads")
	}
}

// acked counts only acknowledgements of AppendEntries sent after since,
// of the term asked about, from the voters given, and its channel wakes a
// waiter at the next acknowledgement (ReadIndex's quorum confirmation).
func TestLeaseTracker_AckedSince(t *testing.T) {
	tr := newLeaseTracker(Config{HeartbeatTimeout: time.Second})
	ms := time.Millisecond
	five := []raft.ServerID{"n2", "n3", "n4", "n5"}
	tr.ack("n2", 5, 10*ms)
	tr.ack("n3", 5, 20*ms)
	if ok, _ := tr.acked(5, five, 2, 9*ms); !ok {
		t.Error("n2 at 10ms and n3 at 20ms, since 9ms: want confirmed")
	}
	if ok, _ := tr.acked(5, five, 2, 10*ms); ok {
		t.Error("n2's heartbeat was not sent after the read began (10ms): it must not count")
	}
	if ok, _ := tr.acked(6, five, 1, 0); ok {
		t.Error("acknowledgements of term 5 confirmed term 6")
	}
	if ok, _ := tr.acked(5, []raft.ServerID{"n4", "n5"}, 1, 0); ok {
		t.Error("acknowledgements of n2 and n3 counted for voters without them")
	}
	_, next := tr.acked(5, five, 2, 10*ms)
	select {
	case <-next:
		t.Fatal("woken before any acknowledgement")
	default:
	}
	tr.ack("n4", 5, 30*ms)
	select {
	case <-next:
	default:
		t.Fatal("not woken by an acknowledgement")
	}
	if ok, _ := tr.acked(5, five, 2, 10*ms); !ok {
		t.Error("n3 and n4 after 10ms: want confirmed")
	}
}
