package server

import (
	"context"
	"fmt"

	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
)

// maxParallelExpiries bounds the expiry proposals in flight at once.
const maxParallelExpiries = 64

// followLeadership runs for the server's life: on each leadership it takes
// over and runs the expiry loop until the leadership ends.
func (s *Server) followLeadership() {
	for {
		l := s.node.Leadership()
		s.serving.Store(0)
		if l.Leader {
			s.lead(l)
		} else {
			s.registerWithLeader()
		}
		select {
		case <-l.Changed:
		case <-s.node.Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// lead takes over as leader of term l.Term and expires sessions until the
// leadership changes. The takeover (docs/design.md §3): apply every entry of
// earlier terms (barrier), record this leadership in the log so expiries of
// older terms are ignored from here on, restart the token counter above
// this node's recorded reservation, initialise the issuer and token floor,
// create the first signing key if the state has none (keys.go),
// then restart every session's full TTL from now.
func (s *Server) lead(l raftstore.Leadership) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Changed:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		err := s.takeOver(ctx, l.Term)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("leader takeover failed; retrying", "term", l.Term, "err", err)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
	s.expiry.restartAll()
	s.rearmDelays()
	s.claims.restartAll()
	s.serving.Store(l.Term)
	s.log.Info("leader serving", "term", l.Term, "node", s.cfg.Raft.NodeID)
	s.expireLoop(ctx, l.Term)
}

func (s *Server) takeOver(ctx context.Context, term uint64) error {
	if err := s.node.Barrier(ctx); err != nil {
		return err
	}
	if _, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: term}}}); err != nil {
		return err
	}
	// Restart the token counter above every token this node may have
	// handed out, whatever its log lost (docs/design.md §2).
	reserve := &statev1.ReserveTokens{Floor: uint64(s.reservation.load()), Block: s.cfg.TokenReserveBlock}
	if _, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_ReserveTokens{ReserveTokens: reserve}}); err != nil {
		return err
	}
	var issuer, registered string
	var last uint64
	s.sm.read(func(m *fsm.Machine) {
		issuer, last, registered = m.Issuer(), uint64(m.LastToken()), m.NodeAPIAddr(s.cfg.Raft.NodeID)
	})
	s.faults.tookOver(last)
	if registered != s.apiAddr() {
		if _, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: s.cfg.Raft.NodeID, ApiAddr: s.apiAddr()}}}); err != nil {
			return err
		}
	}
	if issuer == "" || uint64(s.cfg.TokenFloor) > last {
		if issuer == "" {
			issuer = newIssuer()
		}
		if _, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: issuer, TokenFloor: uint64(s.cfg.TokenFloor)}}}); err != nil {
			return err
		}
	}
	// The first signing key, before this leader serves a grant; a state
	// from before signed grants gets one here too.
	return s.bootstrapKey(ctx)
}

// newIssuer returns a random issuer id for a new cluster.
func newIssuer() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// expireLoop proposes the expiry of every session whose lease ran out,
// stamped with this leadership's term, until ctx ends.
func (s *Server) expireLoop(ctx context.Context, term uint64) {
	tick := time.NewTicker(s.cfg.ExpiryInterval)
	defer tick.Stop()
	props := &leaderProposals{s: s, sem: make(chan struct{}, maxParallelExpiries)}
	defer props.inflight.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !s.endDueDelays(ctx, term, props) {
			return
		}
		for _, id := range s.expiry.due() {
			cmd := &statev1.Command{Op: &statev1.Command_ExpireSession{ExpireSession: &statev1.ExpireSession{Session: id, Term: term}}}
			if !props.propose(ctx, cmd, "expire session", "session", id) {
				return
			}
		}
		for _, cmd := range s.queueDue(term) {
			if !props.propose(ctx, cmd, "queue expiry", "command", fmt.Sprintf("%T", cmd.GetOp())) {
				return
			}
		}
	}
}

// leaderProposals are the proposals the leader makes of its own accord
// (expiries, ends of lock delays), at most maxParallelExpiries in flight.
type leaderProposals struct {
	s        *Server
	sem      chan struct{}
	inflight sync.WaitGroup
}

// propose proposes cmd in the background, logging a failure as what with
// attrs, once fewer than the maximum are in flight. It reports false when
// ctx ended first.
func (p *leaderProposals) propose(ctx context.Context, cmd *statev1.Command, what string, attrs ...any) bool {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	p.inflight.Add(1)
	go func() {
		defer func() { <-p.sem; p.inflight.Done() }()
		if _, err := p.s.propose(ctx, cmd); err != nil && ctx.Err() == nil {
			p.s.log.Warn(what, append(attrs, "err", err)...)
		}
	}()
	return true
}

// registerWithLeader records this follower's API address through the
// leader, so other members can forward to it when it leads and cluster
// status can reach it. It retries in the background until it succeeds or
// the leadership view changes.
func (s *Server) registerWithLeader() {
	l := s.node.Leadership()
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		for attempt := 0; attempt < 600; attempt++ {
			var registered string
			s.sm.read(func(m *fsm.Machine) { registered = m.NodeAPIAddr(s.cfg.Raft.NodeID) })
			if registered == s.apiAddr() {
				return
			}
			if target := s.leaderURL(); target != nil {
				ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
				c := fencedv1connect.NewClusterServiceClient(s.members, target.String())
				_, err := c.RegisterNode(ctx, connect.NewRequest(&fencedv1.RegisterNodeRequest{Id: s.cfg.Raft.NodeID, ApiAddr: s.apiAddr()}))
				cancel()
				if err == nil {
					return
				}
			}
			select {
			case <-l.Changed:
				return
			case <-s.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}
