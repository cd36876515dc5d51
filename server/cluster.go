package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/hashicorp/raft"
)

// memberProbeTimeout bounds asking a member for its applied index.
const memberProbeTimeout = 500 * time.Millisecond

// clusterService implements the ClusterService API.
type clusterService struct{ s *Server }

var _ fencedv1connect.ClusterServiceHandler = (*clusterService)(nil)

// Status implements ClusterServiceHandler. On the leader it asks every
// member for its applied index (in parallel, bounded) to report its lag.
func (h *clusterService) Status(ctx context.Context, req *connect.Request[fencedv1.ClusterStatusRequest]) (*connect.Response[fencedv1.ClusterStatusResponse], error) {
	s := h.s
	st := s.node.Stats()
	resp := &fencedv1.ClusterStatusResponse{NodeId: st.NodeID, Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: s.sm.appliedIndex()}
	if req.Header().Get(headerProbe) != "" {
		return connect.NewResponse(resp), nil // a member's probe: its own indexes only
	}
	f := s.node.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, toConnect(err)
	}
	var apis map[string]string
	s.sm.read(func(m *fsm.Machine) {
		resp.LastToken = uint64(m.LastToken())
		apis = make(map[string]string)
		for _, srv := range f.Configuration().Servers {
			apis[string(srv.ID)] = m.NodeAPIAddr(string(srv.ID))
		}
	})
	type probe struct {
		i       int
		applied uint64
		role    string
	}
	probes := make(chan probe)
	servers := f.Configuration().Servers
	for i, srv := range servers {
		m := &fencedv1.Member{Id: string(srv.ID), PeerAddr: string(srv.Address), ApiAddr: apis[string(srv.ID)], Voter: srv.Suffrage == raft.Voter}
		resp.Members = append(resp.Members, m)
		go func() {
			applied, role := s.probeMember(ctx, m)
			probes <- probe{i, applied, role}
		}()
	}
	for range servers {
		p := <-probes
		m := resp.Members[p.i]
		m.AppliedIndex, m.Role = p.applied, p.role
		if p.applied < st.CommitIndex && p.role != "unreachable" {
			m.Lag = st.CommitIndex - p.applied
		}
	}
	return connect.NewResponse(resp), nil
}

// probeMember returns a member's applied index and role, from this node's
// own state for itself and from the member's local status otherwise.
func (s *Server) probeMember(ctx context.Context, m *fencedv1.Member) (uint64, string) {
	if m.Id == s.cfg.Raft.NodeID {
		return s.sm.appliedIndex(), roleOf(s.node.Stats().State)
	}
	if m.ApiAddr == "" {
		return 0, "unreachable"
	}
	ctx, cancel := context.WithTimeout(ctx, memberProbeTimeout)
	defer cancel()
	c := fencedv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+m.ApiAddr)
	req := connect.NewRequest(&fencedv1.ClusterStatusRequest{})
	req.Header().Set(HeaderLocal, "1")
	req.Header().Set(headerProbe, "1")
	resp, err := c.Status(ctx, req)
	if err != nil {
		return 0, "unreachable"
	}
	role := "follower"
	if resp.Msg.Leader == resp.Msg.NodeId {
		role = "leader"
	}
	return resp.Msg.AppliedIndex, role
}

// headerProbe marks a member-to-member status probe, answered without
// probing further.
const headerProbe = "X-Fenced-Probe"

func roleOf(state string) string {
	switch state {
	case "Leader":
		return "leader"
	case "Candidate":
		return "candidate"
	}
	return "follower"
}

// AddMember implements ClusterServiceHandler.
func (h *clusterService) AddMember(ctx context.Context, req *connect.Request[fencedv1.AddMemberRequest]) (*connect.Response[fencedv1.AddMemberResponse], error) {
	m := req.Msg
	if m.Id == "" || m.PeerAddr == "" {
		return nil, toConnect(fmt.Errorf("%w: add member needs an id and a peer address (HOST:PORT)", fence.ErrInvalidArgument))
	}
	f := h.s.node.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, toConnect(err)
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == m.Id {
			return nil, toConnect(fmt.Errorf("%w: node id %q is already a member (at %s); remove it first or pick another id", fence.ErrInvalidArgument, m.Id, srv.Address))
		}
		if string(srv.Address) == m.PeerAddr {
			return nil, toConnect(fmt.Errorf("%w: peer address %s is already used by member %q", fence.ErrInvalidArgument, m.PeerAddr, srv.ID))
		}
	}
	if err := h.s.node.Raft().AddVoter(raft.ServerID(m.Id), raft.ServerAddress(m.PeerAddr), 0, timeoutOf(ctx)).Error(); err != nil {
		return nil, toConnect(raftError(err))
	}
	return connect.NewResponse(&fencedv1.AddMemberResponse{}), nil
}

// RemoveMember implements ClusterServiceHandler.
func (h *clusterService) RemoveMember(ctx context.Context, req *connect.Request[fencedv1.RemoveMemberRequest]) (*connect.Response[fencedv1.RemoveMemberResponse], error) {
	id := req.Msg.Id
	f := h.s.node.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, toConnect(err)
	}
	var found bool
	voters := 0
	for _, srv := range f.Configuration().Servers {
		found = found || string(srv.ID) == id
		if srv.Suffrage == raft.Voter {
			voters++
		}
	}
	switch {
	case !found:
		return nil, toConnect(fmt.Errorf("%w: node id %q is not a member", fence.ErrInvalidArgument, id))
	case voters <= 1:
		return nil, toConnect(fmt.Errorf("%w: %q is the last voter; removing it would leave no cluster", fence.ErrInvalidArgument, id))
	}
	if err := h.s.node.Raft().RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx)).Error(); err != nil {
		return nil, toConnect(raftError(err))
	}
	return connect.NewResponse(&fencedv1.RemoveMemberResponse{}), nil
}

// TransferLeader implements ClusterServiceHandler.
func (h *clusterService) TransferLeader(ctx context.Context, req *connect.Request[fencedv1.TransferLeaderRequest]) (*connect.Response[fencedv1.TransferLeaderResponse], error) {
	r := h.s.node.Raft()
	var fut raft.Future
	if id := req.Msg.Id; id != "" {
		f := r.GetConfiguration()
		if err := f.Error(); err != nil {
			return nil, toConnect(err)
		}
		var addr raft.ServerAddress
		for _, srv := range f.Configuration().Servers {
			if string(srv.ID) == id {
				addr = srv.Address
			}
		}
		if addr == "" {
			return nil, toConnect(fmt.Errorf("%w: node id %q is not a member", fence.ErrInvalidArgument, id))
		}
		if id == h.s.cfg.Raft.NodeID {
			return connect.NewResponse(&fencedv1.TransferLeaderResponse{Leader: id}), nil
		}
		fut = r.LeadershipTransferToServer(raft.ServerID(id), addr)
	} else {
		fut = r.LeadershipTransfer()
	}
	if err := fut.Error(); err != nil {
		return nil, toConnect(raftError(err))
	}
	// The new leader is known here once its first heartbeat arrives.
	var leader string
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		if leader, _ = h.s.node.Leader(); leader != "" && leader != h.s.cfg.Raft.NodeID {
			break
		}
	}
	return connect.NewResponse(&fencedv1.TransferLeaderResponse{Leader: leader}), nil
}

// RegisterNode implements ClusterServiceHandler.
func (h *clusterService) RegisterNode(ctx context.Context, req *connect.Request[fencedv1.RegisterNodeRequest]) (*connect.Response[fencedv1.RegisterNodeResponse], error) {
	_, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: req.Msg.Id, ApiAddr: req.Msg.ApiAddr}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.RegisterNodeResponse{}), nil
}

func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return 10 * time.Second
}

// raftError marks raft's "not the leader" errors so clients retry.
func raftError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w: %v", fence.ErrNotLeader, err)
	}
	return err
}
