package fsm

import (
	"fmt"
	"time"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Machine is the deterministic state machine. Its zero value is not usable;
// call New.
type Machine struct {
	issuer      string
	lastToken   fence.Token
	lastSession uint64
	leaderTerm  uint64
	sessions    map[uint64]*session
	byRequest   map[string]uint64 // request id -> live session, to de-duplicate creates
	locks       map[string]*lock
	kv          map[string]*kvEntry
	kvReplies   kvReplies
	nodes       map[string]string // node id -> API address
	obs         Observer
	faults      faults // node-local test faults; none in production builds
}

// New returns an empty Machine reporting to obs (nil for none).
func New(obs Observer) *Machine {
	if obs == nil {
		obs = NopObserver{}
	}
	m := &Machine{obs: obs}
	m.reset()
	return m
}

func (m *Machine) reset() {
	m.issuer, m.lastToken, m.lastSession, m.leaderTerm = "", 0, 0, 0
	m.sessions = make(map[uint64]*session)
	m.byRequest = make(map[string]uint64)
	m.locks = make(map[string]*lock)
	m.kv = make(map[string]*kvEntry)
	m.kvReplies = kvReplies{}
	m.nodes = make(map[string]string)
}

// Apply applies one command and returns its result. It is deterministic:
// the same state and command always give the same result and new state.
func (m *Machine) Apply(c *statev1.Command) Result {
	now := c.GetNowUnixMs()
	switch op := c.GetOp().(type) {
	case *statev1.Command_Init:
		return m.init(op.Init)
	case *statev1.Command_NewLeader:
		if t := op.NewLeader.GetTerm(); t > m.leaderTerm {
			m.leaderTerm = t
		}
		return Result{}
	case *statev1.Command_CreateSession:
		return m.createSession(op.CreateSession.GetRequestId(), op.CreateSession.GetTtlMs())
	case *statev1.Command_CloseSession:
		return m.endSession(op.CloseSession.GetSession(), Closed, now)
	case *statev1.Command_ExpireSession:
		if op.ExpireSession.GetTerm() < m.leaderTerm {
			return Result{Ignored: true}
		}
		return m.endSession(op.ExpireSession.GetSession(), Expired, now)
	case *statev1.Command_Acquire:
		return m.acquire(op.Acquire, now)
	case *statev1.Command_Release:
		return m.release(op.Release, now)
	case *statev1.Command_CancelWait:
		return m.cancelWait(op.CancelWait.GetSession(), op.CancelWait.GetName())
	case *statev1.Command_KvWrite:
		return m.kvWrite(op.KvWrite)
	case *statev1.Command_RegisterNode:
		return m.registerNode(op.RegisterNode)
	}
	return Result{Err: fmt.Errorf("%w: unknown command %T", fence.ErrInvalidArgument, c.GetOp())}
}

func (m *Machine) init(in *statev1.Init) Result {
	if m.issuer == "" {
		if in.GetIssuer() == "" {
			return Result{Err: fmt.Errorf("%w: init needs an issuer", fence.ErrInvalidArgument)}
		}
		m.issuer = in.GetIssuer()
	}
	floor := fence.Token(in.GetTokenFloor())
	if floor > fence.MaxToken {
		return Result{Err: fmt.Errorf("%w: token floor %d is above the maximum %d", fence.ErrInvalidArgument, floor, fence.MaxToken)}
	}
	if floor > m.lastToken {
		m.lastToken = floor
	}
	return Result{}
}

// nextToken returns the next token, or ErrTokenOverflow at the end of the
// range. The counter only moves forward.
func (m *Machine) nextToken() (fence.Token, error) {
	if m.lastToken >= fence.MaxToken {
		return 0, fmt.Errorf("%w: the last token %d is the maximum; start a new cluster", fence.ErrTokenOverflow, m.lastToken)
	}
	m.lastToken++
	return m.lastToken, nil
}

func (m *Machine) grantOf(l *lock) fence.Grant {
	g := fence.Grant{
		Name:     l.name,
		Token:    l.token,
		Issuer:   m.issuer,
		Session:  l.holder,
		IssuedAt: time.UnixMilli(l.issuedAt).UTC(),
	}
	if s := m.sessions[l.holder]; s != nil {
		g.TTL = time.Duration(s.ttlMs) * time.Millisecond
	}
	return g
}

// Issuer returns the cluster's issuer id, empty before Init.
func (m *Machine) Issuer() string { return m.issuer }

// LastToken returns the last token issued (or the floor).
func (m *Machine) LastToken() fence.Token { return m.lastToken }

// LeaderTerm returns the newest leadership term applied.
func (m *Machine) LeaderTerm() uint64 { return m.leaderTerm }
