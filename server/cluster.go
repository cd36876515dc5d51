package server

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
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
	members, err := s.node.Members()
	if err != nil {
		return nil, toConnect(err)
	}
	var apis map[string]string
	s.sm.read(func(m *fsm.Machine) {
		resp.LastToken = uint64(m.LastToken())
		apis = make(map[string]string)
		for _, srv := range members {
			apis[srv.ID] = m.NodeAPIAddr(srv.ID)
		}
	})
	type probe struct {
		i       int
		applied uint64
		role    string
	}
	probes := make(chan probe)
	for i, srv := range members {
		m := &fencedv1.Member{Id: srv.ID, PeerAddr: srv.Addr, ApiAddr: apis[srv.ID], Voter: srv.Voter}
		resp.Members = append(resp.Members, m)
		go func() {
			applied, role := s.probeMember(ctx, m)
			probes <- probe{i, applied, role}
		}()
	}
	for range members {
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
	c := fencedv1connect.NewClusterServiceClient(s.members, s.memberURL(m.ApiAddr).String())
	req := connect.NewRequest(&fencedv1.ClusterStatusRequest{})
	req.Header().Set(HeaderLocal, "1")
	req.Header().Set(headerProbe, "1")
	// The member checks the caller's credentials itself.
	if c := callerOf(ctx); c != nil && c.authorization != "" {
		req.Header().Set("Authorization", c.authorization)
	} else if c != nil && c.certIdentity != "" {
		req.Header().Set(headerClientIdentity, c.certIdentity)
	}
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
	ctx, cancel := withMembershipTimeout(ctx)
	defer cancel()
	if err := h.s.node.AddVoter(ctx, req.Msg.Id, req.Msg.PeerAddr); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.AddMemberResponse{}), nil
}

// RemoveMember implements ClusterServiceHandler.
func (h *clusterService) RemoveMember(ctx context.Context, req *connect.Request[fencedv1.RemoveMemberRequest]) (*connect.Response[fencedv1.RemoveMemberResponse], error) {
	ctx, cancel := withMembershipTimeout(ctx)
	defer cancel()
	if err := h.s.node.RemoveMember(ctx, req.Msg.Id); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.RemoveMemberResponse{}), nil
}

// TransferLeader implements ClusterServiceHandler.
func (h *clusterService) TransferLeader(ctx context.Context, req *connect.Request[fencedv1.TransferLeaderRequest]) (*connect.Response[fencedv1.TransferLeaderResponse], error) {
	ctx, cancel := withMembershipTimeout(ctx)
	defer cancel()
	leader, err := h.s.node.TransferLeadership(ctx, req.Msg.Id)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.TransferLeaderResponse{Leader: leader}), nil
}

// RegisterNode implements ClusterServiceHandler.
func (h *clusterService) RegisterNode(ctx context.Context, req *connect.Request[fencedv1.RegisterNodeRequest]) (*connect.Response[fencedv1.RegisterNodeResponse], error) {
	if err := fsm.ValidateNode(req.Msg.Id, req.Msg.ApiAddr); err != nil {
		return nil, toConnect(err)
	}
	_, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: req.Msg.Id, ApiAddr: req.Msg.ApiAddr}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.RegisterNodeResponse{}), nil
}

// membershipTimeout bounds a membership change when the caller sets no
// deadline.
const membershipTimeout = 10 * time.Second

// withMembershipTimeout gives ctx the membership timeout unless it has a
// deadline.
func withMembershipTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, membershipTimeout)
}
