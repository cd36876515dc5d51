package raftstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	fence "github.com/fenced-dev/fenced"
)

// transferWait bounds how long TransferLeadership waits to learn the new
// leader once the transfer is done.
const transferWait = 5 * time.Second

// Member is a member of the Raft group as the latest configuration this
// node knows lists it.
type Member struct {
	ID    string
	Addr  string
	Voter bool
}

// Members returns the members of the latest configuration this node knows,
// committed or not.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.checkError("members", err)
	}
	var ms []Member
	for _, srv := range f.Configuration().Servers {
		ms = append(ms, Member{ID: string(srv.ID), Addr: string(srv.Address), Voter: srv.Suffrage == raft.Voter})
	}
	return ms, nil
}

// AddVoter adds a voter with id at the peer address addr and waits until
// the configuration change is committed. It works on the leader only. An
// id or address already in the cluster is refused with an error wrapping
// fence.ErrInvalidArgument, and nothing changes.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if err := fence.ValidateNodeID(id); err != nil {
		return fmt.Errorf("add member: %w", err)
	}
	if err := fence.ValidateNodeAddr("peer address", addr); err != nil {
		return fmt.Errorf("add member %q: %w", id, err)
	}
	ms, err := n.Members()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.ID == id {
			return fmt.Errorf("%w: node id %q is already a member (at %s); remove it first or pick another id", fence.ErrInvalidArgument, id, m.Addr)
		}
		if m.Addr == addr {
			return fmt.Errorf("%w: peer address %s is already used by member %q", fence.ErrInvalidArgument, addr, m.ID)
		}
	}
	// The new node may talk to this one from now on, before the
	// configuration naming it is written.
	defer n.gate.adding(id, addr)()
	return n.changeMembers(ctx, "add member", func(timeout time.Duration) raft.Future {
		return n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout)
	})
}

// RemoveMember removes the member id and waits until the configuration
// change is committed. It works on the leader only. An id that is not a
// member, or the last voter, is refused with an error wrapping
// fence.ErrInvalidArgument, and nothing changes.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if err := fence.ValidateNodeID(id); err != nil {
		return fmt.Errorf("remove member: %w", err)
	}
	ms, err := n.Members()
	if err != nil {
		return err
	}
	found, voters := false, 0
	for _, m := range ms {
		found = found || m.ID == id
		if m.Voter {
			voters++
		}
	}
	switch {
	case !found:
		return fmt.Errorf("%w: node id %q is not a member", fence.ErrInvalidArgument, id)
	case voters <= 1:
		return fmt.Errorf("%w: %q is the last voter; removing it would leave no cluster", fence.ErrInvalidArgument, id)
	}
	return n.changeMembers(ctx, "remove member", func(timeout time.Duration) raft.Future {
		return n.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	})
}

// changeMembers runs one configuration change and turns its error into one
// that says whether it may have happened.
func (n *Node) changeMembers(ctx context.Context, op string, start func(timeout time.Duration) raft.Future) error {
	if _, err := n.await(ctx, start); err != nil {
		return n.proposalError(op, err)
	}
	return nil
}

// TransferLeadership hands leadership to the member id, or to the most
// up-to-date other voter when id is empty, and returns the new leader's id
// once this node hears from it (empty when it did not within a few
// seconds or before ctx ended). It works on the leader only; naming this
// node returns at once. An id that is not a member is refused with an error
// wrapping fence.ErrInvalidArgument.
func (n *Node) TransferLeadership(ctx context.Context, id string) (string, error) {
	var addr string
	if id == "" {
		// hashicorp/raft says only "cannot find peer" when there is no
		// other voter.
		ms, err := n.Members()
		if err != nil {
			return "", err
		}
		others := 0
		for _, m := range ms {
			if m.ID != n.cfg.NodeID && m.Voter {
				others++
			}
		}
		if others == 0 {
			return "", fmt.Errorf("transfer leadership: %w: this cluster has no other voting member to hand leadership to; add one first (fenced serve --join on the new node, then fenced cluster add ID PEER-ADDR)", fence.ErrInvalidArgument)
		}
	}
	if id != "" {
		if err := fence.ValidateNodeID(id); err != nil {
			return "", fmt.Errorf("transfer leadership: %w", err)
		}
		ms, err := n.Members()
		if err != nil {
			return "", err
		}
		for _, m := range ms {
			if m.ID == id {
				addr = m.Addr
			}
		}
		if addr == "" {
			return "", fmt.Errorf("%w: node id %q is not a member", fence.ErrInvalidArgument, id)
		}
		if id == n.cfg.NodeID {
			return id, nil
		}
	}
	if n.lease != nil {
		// The target's voters ignore this leader once the transfer
		// starts: give up the lease of this term first.
		n.lease.revoke(n.raft.CurrentTerm())
	}
	_, err := n.await(ctx, func(time.Duration) raft.Future {
		if id == "" {
			return n.raft.LeadershipTransfer()
		}
		return n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	})
	if err != nil {
		return "", n.checkError("transfer leadership", err)
	}
	// The new leader is known here once its first heartbeat arrives.
	wait := time.NewTimer(transferWait)
	defer wait.Stop()
	for {
		l := n.KnownLeader()
		if l.ID != "" && l.ID != n.cfg.NodeID {
			return l.ID, nil
		}
		select {
		case <-l.Changed:
		case <-wait.C:
			return "", nil
		case <-ctx.Done():
			return "", nil
		case <-n.done:
			return "", nil
		}
	}
}
