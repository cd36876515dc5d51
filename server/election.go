package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// electionService implements the ElectionService API.
type electionService struct{ s *Server }

var _ fencedv1connect.ElectionServiceHandler = (*electionService)(nil)

// validateElection checks what every election request carries: the name,
// a session (a candidate hangs off one) and, for a value, its size under
// Limits.MaxElectionValueBytes.
func (s *Server) validateElection(name string, session uint64, value []byte) error {
	errs := []error{fence.ValidateName(name)}
	if session == 0 {
		errs = append(errs, fmt.Errorf("%w: session is 0; an election request needs a session (a candidate hangs off one)", fence.ErrInvalidArgument))
	}
	if limit := s.cfg.Limits.electionValueLimit(); len(value) > limit {
		errs = append(errs, fmt.Errorf("%w: value is %d bytes, larger than %d (--max-election-value-bytes)", fence.ErrInvalidArgument, len(value), limit))
	}
	return errors.Join(errs...)
}

// Campaign implements ElectionServiceHandler. A call with wait_ms > 0 that
// queues blocks until the state machine makes its session the leader (the
// grant is pushed to this call), the wait runs out or the call ends; then
// the session leaves the candidates, unless it won the race, in which case
// the call returns the leadership. A call cancelled while it waits may
// leave its session leading; the SDK withdraws the campaign with a Resign
// naming its seq.
func (h *electionService) Campaign(ctx context.Context, req *connect.Request[fencedv1.CampaignRequest]) (*connect.Response[fencedv1.CampaignResponse], error) {
	m := req.Msg
	if err := errors.Join(h.s.validateElection(m.Name, m.Session, m.Value), fence.ValidateWaitMillis(m.WaitMs)); err != nil {
		return nil, toConnect(err)
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, false)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_Campaign{Campaign: &statev1.Campaign{
		Session: m.Session, Seq: m.Seq, Name: m.Name, Value: m.Value, Quota: h.s.quota(ctx), SecretHash: hash,
	}}})
	if err != nil {
		return nil, toConnect(h.s.limitErr(err))
	}
	if res.Queued && m.WaitMs > 0 {
		key := waitKey{kind: fence.KindLeader, name: m.Name, session: m.Session}
		cancel := &statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{Session: m.Session, Name: m.Name, CancelWait: true}}}
		res, err = h.s.await(ctx, key, time.Duration(m.WaitMs)*time.Millisecond, func(fm *fsm.Machine) waitState {
			info := fm.Election(m.Name)
			st := waitState{holder: info.Leader.Session}
			if info.Leader.Session == m.Session {
				st.granted, st.grant = true, info.Leader
			}
			for _, c := range info.Candidates {
				st.queued = st.queued || c == m.Session
			}
			return st
		}, cancel)
		if err != nil {
			return nil, toConnect(err)
		}
	}
	resp := &fencedv1.CampaignResponse{Elected: res.Granted, Leader: res.Holder, Queued: res.Queued && !res.Granted}
	if res.Granted {
		resp.Grant = grantProto(h.s.faults.reported(res.Grant))
		resp.Leader = m.Session
	}
	return connect.NewResponse(resp), nil
}

// Resign implements ElectionServiceHandler.
func (h *electionService) Resign(ctx context.Context, req *connect.Request[fencedv1.ResignRequest]) (*connect.Response[fencedv1.ResignResponse], error) {
	m := req.Msg
	if err := h.s.validateElection(m.Name, m.Session, nil); err != nil {
		return nil, toConnect(err)
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, true)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_Resign{Resign: &statev1.Resign{
		Session: m.Session, Seq: m.Seq, Name: m.Name, WithdrawSeq: m.WithdrawSeq, SecretHash: hash,
	}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.ResignResponse{Result: releaseProto(res.Release)}), nil
}

// Proclaim implements ElectionServiceHandler. A session that does not lead
// the election (or not with the token the request names) is refused with
// fence.ErrNotGranted.
func (h *electionService) Proclaim(ctx context.Context, req *connect.Request[fencedv1.ProclaimRequest]) (*connect.Response[fencedv1.ProclaimResponse], error) {
	m := req.Msg
	if err := h.s.validateElection(m.Name, m.Session, m.Value); err != nil {
		return nil, toConnect(err)
	}
	if m.Token != 0 {
		if err := fence.ValidateToken(fence.Token(m.Token)); err != nil {
			return nil, toConnect(err)
		}
	}
	hash, err := h.s.checkOwner(m.Session, m.Secret, false)
	if err != nil {
		return nil, toConnect(err)
	}
	res, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_Proclaim{Proclaim: &statev1.Proclaim{
		Session: m.Session, Seq: m.Seq, Name: m.Name, Value: m.Value, Token: m.Token, SecretHash: hash,
	}}})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.ProclaimResponse{Grant: grantProto(res.Grant)}), nil
}

// Leader implements ElectionServiceHandler. On the leader it is answered
// after a read index (forwarding), so it is linearizable.
func (h *electionService) Leader(ctx context.Context, req *connect.Request[fencedv1.LeaderRequest]) (*connect.Response[fencedv1.LeaderResponse], error) {
	if err := fence.ValidateName(req.Msg.Name); err != nil {
		return nil, toConnect(err)
	}
	var info fsm.ElectionInfo
	h.s.sm.read(func(fm *fsm.Machine) { info = fm.Election(req.Msg.Name) })
	return connect.NewResponse(&fencedv1.LeaderResponse{
		HasLeader: info.HasLeader(), Grant: grantProto(info.Leader), Value: info.Value, Revision: info.Revision, Candidates: uint32(len(info.Candidates)),
	}), nil
}

// Observe implements ElectionServiceHandler. The stream opens after a read
// index (forwarding), so its first message is at least as new as every
// change acknowledged before the call. Then every change applied on this
// node is read from the replicated history and sent, oldest first; a
// client too slow to keep up with ElectionHistory changes is sent the
// current state marked skipped. The stream ends, with Unavailable, when
// this node stops being the serving leader: the client resumes on the next
// leader from the last revision it received, and the next leader's
// history, replicated, continues it without a gap.
func (h *electionService) Observe(ctx context.Context, req *connect.Request[fencedv1.ObserveRequest], stream *connect.ServerStream[fencedv1.ObserveResponse]) error {
	m := req.Msg
	if err := h.s.authorize(ctx, fencedv1connect.ElectionServiceObserveProcedure, needOf(m)); err != nil {
		return toConnect(err)
	}
	if err := fence.ValidateName(m.Name); err != nil {
		return toConnect(err)
	}
	sub := h.s.elections.subscribe(m.Name)
	defer h.s.elections.unsubscribe(sub)
	h.s.metrics.electionObservers.Inc()
	defer h.s.metrics.electionObservers.Dec()
	// A follower serves only a stale read asked for with HeaderLocal; it
	// does not end the stream when the leadership moves.
	local := !h.s.node.IsLeader()
	term := h.s.serving.Load()
	known := h.s.node.KnownLeader()
	after := m.AfterRevision
	for {
		var changes []fsm.ElectionChange
		var skipped bool
		var err error
		h.s.sm.read(func(fm *fsm.Machine) { changes, skipped, err = fm.ElectionChanges(m.Name, after) })
		if err != nil {
			return toConnect(err)
		}
		for i, c := range changes {
			msg := &fencedv1.ObserveResponse{Revision: c.Revision, PrevRevision: c.PrevRevision, HasLeader: c.Leader.Token != 0,
				Leader: grantProto(c.Leader), Value: c.Value, Skipped: skipped && i == 0}
			if err := stream.Send(msg); err != nil {
				return err
			}
			after = c.Revision
		}
		select {
		case <-sub.changed:
		case <-known.Changed:
			known = h.s.node.KnownLeader()
		case <-h.s.node.Done():
			return toConnect(errUnavailable)
		case <-ctx.Done():
			return nil
		case <-h.s.ctx.Done():
			return toConnect(errUnavailable)
		}
		if !local && (h.s.serving.Load() != term || !h.s.node.IsLeader()) {
			return toConnect(fmt.Errorf("%w: node %s stopped serving as leader; resume the observation from revision %d on the new leader", fence.ErrNotLeader, h.s.cfg.Raft.NodeID, after))
		}
	}
}

// electionWatch wakes the Observe streams of an election when a change of
// it is applied (events.ElectionChanged), and every stream when a snapshot
// replaced the whole state. A wake-up carries nothing: the stream reads
// the changes from the state, so a wake-up coalesced with another loses
// nothing.
type electionWatch struct {
	mu     sync.Mutex
	byName map[string]map[*electionSub]struct{}
}

// electionSub is one Observe stream's subscription.
type electionSub struct {
	name    string
	changed chan struct{}
}

func newElectionWatch() *electionWatch {
	return &electionWatch{byName: make(map[string]map[*electionSub]struct{})}
}

func (w *electionWatch) subscribe(name string) *electionSub {
	sub := &electionSub{name: name, changed: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byName[name] == nil {
		w.byName[name] = make(map[*electionSub]struct{})
	}
	w.byName[name][sub] = struct{}{}
	return sub
}

func (w *electionWatch) unsubscribe(sub *electionSub) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byName[sub.name], sub)
	if len(w.byName[sub.name]) == 0 {
		delete(w.byName, sub.name)
	}
}

// notify wakes the streams of name; never blocks.
func (w *electionWatch) notify(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for sub := range w.byName[name] {
		wake(sub.changed)
	}
}

// notifyAll wakes every stream.
func (w *electionWatch) notifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, subs := range w.byName {
		for sub := range subs {
			wake(sub.changed)
		}
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
