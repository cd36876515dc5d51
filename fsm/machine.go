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
	tokens      tokens
	lastSession uint64
	leaderTerm  uint64
	sessions    map[uint64]*session
	byRequest   map[string]uint64 // request id -> live session, to de-duplicate creates
	owners      map[string]*usage // owner -> what its live sessions use (quota.go)
	locks       *lockTable
	semaphores  *semaphoreTable
	elections   *electionTable
	rwlocks     *rwTable
	queues      *queueTable
	kv          *kvStore
	latches     *latchTable
	limiters    *limiterTable
	nodes       nodeTable
	keys        *keyring // the signing keys (keys.go)
	// lineage is the issuers this state was restored from, oldest first
	// (reissue.go).
	lineage []*statev1.IssuerEpoch
	// live is every grant in force by token (livegrants.go), rebuilt from
	// the primitives on restore.
	live liveGrants
	// primitives are the session-bound primitives, indexed by kind.
	primitives [numKinds]primitive
	// sections are the snapshot sections after the sessions, in restore
	// order.
	sections []section
	obs      Observer
	faults   faults // node-local test faults; none in production builds
	// persist is the node-local reservation hook (reservation.go); reset
	// keeps it.
	persist func(end fence.Token)
	// checked is what the invariant checks gather in one walk of the
	// sessions, while they run (invariants.go).
	checked sessionPass
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
	m.issuer, m.tokens, m.lastSession, m.leaderTerm = "", tokens{persist: m.persist}, 0, 0
	m.sessions = make(map[uint64]*session)
	m.byRequest = make(map[string]uint64)
	m.owners = make(map[string]*usage)
	m.locks = newLockTable(m)
	m.elections = newElectionTable(m)
	m.rwlocks = newRWTable(m)
	m.kv = newKVStore(m)
	m.queues = newQueueTable(m)
	m.latches = newLatchTable(m)
	m.limiters = newLimiterTable()
	m.nodes = make(nodeTable)
	m.semaphores = newSemaphoreTable(m)
	m.live = liveGrants{}
	m.keys = &keyring{}
	m.lineage = nil
	m.primitives = [numKinds]primitive{kindLock: m.locks, kindSemaphore: m.semaphores, kindElection: m.elections, kindRWLock: m.rwlocks, kindQueue: m.queues}
	m.sections = []section{m.locks, m.semaphores, m.elections, m.rwlocks, m.queues, m.kv, m.nodes, m.keys, m.latches, m.limiters}
}

// Apply applies one command and returns its result. It is deterministic:
// the same state and command always give the same result and new state.
func (m *Machine) Apply(c *statev1.Command) Result {
	now := c.GetNowUnixMs()
	switch op := c.GetOp().(type) {
	case *statev1.Command_Init:
		return m.init(op.Init)
	case *statev1.Command_NewLeader:
		return m.newLeader(op.NewLeader.GetTerm())
	case *statev1.Command_ReserveTokens:
		return m.reserveTokens(op.ReserveTokens)
	case *statev1.Command_CreateSession:
		return m.createSession(op.CreateSession.GetRequestId(), op.CreateSession.GetTtlMs(), op.CreateSession.GetQuota(), op.CreateSession.GetSecretHash())
	case *statev1.Command_CloseSession:
		return m.closeSession(op.CloseSession, now)
	case *statev1.Command_Revoke:
		return m.locks.revoke(op.Revoke, now)
	case *statev1.Command_ExpireSession:
		return m.expireSession(op.ExpireSession, now)
	case *statev1.Command_Acquire:
		return m.locks.acquire(op.Acquire, now)
	case *statev1.Command_Release:
		return m.locks.release(op.Release, now)
	case *statev1.Command_CancelWait:
		return m.locks.cancelWait(op.CancelWait.GetSession(), op.CancelWait.GetName())
	case *statev1.Command_SemAcquire:
		return m.semaphores.acquire(op.SemAcquire, now)
	case *statev1.Command_SemRelease:
		return m.semaphores.release(op.SemRelease, now)
	case *statev1.Command_SemCancelWait:
		return m.semaphores.cancelWait(op.SemCancelWait.GetSession(), op.SemCancelWait.GetName(), now)
	case *statev1.Command_EndLockDelay:
		return m.locks.endDelay(op.EndLockDelay, now)
	case *statev1.Command_RenewGrant:
		return m.locks.renew(op.RenewGrant)
	case *statev1.Command_Campaign:
		return m.elections.campaign(op.Campaign, now)
	case *statev1.Command_Resign:
		return m.elections.resign(op.Resign, now)
	case *statev1.Command_Proclaim:
		return m.elections.proclaim(op.Proclaim, now)
	case *statev1.Command_RwAcquire:
		return m.rwlocks.acquire(op.RwAcquire, now)
	case *statev1.Command_RwRelease:
		return m.rwlocks.release(op.RwRelease, now)
	case *statev1.Command_RwCancelWait:
		return m.rwlocks.cancelWait(op.RwCancelWait, now)
	case *statev1.Command_QueuePush:
		return m.queues.push(op.QueuePush, now)
	case *statev1.Command_QueueClaim:
		return m.queues.claim(op.QueueClaim, now)
	case *statev1.Command_QueueAck:
		return m.queues.ack(op.QueueAck, now)
	case *statev1.Command_QueueNack:
		return m.queues.nack(op.QueueNack, now)
	case *statev1.Command_QueueExtend:
		return m.queues.extend(op.QueueExtend, now)
	case *statev1.Command_ExpireClaim:
		return m.queues.expire(op.ExpireClaim, now)
	case *statev1.Command_QueueCancelWait:
		return m.queues.cancelWait(op.QueueCancelWait)
	case *statev1.Command_QueueTick:
		return m.queues.tick(now)
	case *statev1.Command_QueuePushBatch:
		return m.queues.pushBatch(op.QueuePushBatch, now)
	case *statev1.Command_QueueAckBatch:
		return m.queues.ackBatch(op.QueueAckBatch, now)
	case *statev1.Command_KvWrite:
		return m.kv.write(op.KvWrite)
	case *statev1.Command_RegisterNode:
		return m.nodes.register(op.RegisterNode)
	case *statev1.Command_RotateKeys:
		return m.keys.rotate(op.RotateKeys)
	case *statev1.Command_LatchCreate:
		return m.latches.create(op.LatchCreate, now)
	case *statev1.Command_LatchCountDown:
		return m.latches.countDown(op.LatchCountDown)
	case *statev1.Command_LimiterConfig:
		return m.limiters.config(op.LimiterConfig, now)
	case *statev1.Command_LimiterTake:
		return m.limiters.take(op.LimiterTake, now)
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
	m.tokens.raise(floor)
	return Result{}
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// Issuer returns the cluster's issuer id, empty before Init.
func (m *Machine) Issuer() string { return m.issuer }

// LastToken returns the last token issued (or the floor).
func (m *Machine) LastToken() fence.Token { return m.tokens.last }

// LeaderTerm returns the newest leadership term applied.
func (m *Machine) LeaderTerm() uint64 { return m.leaderTerm }
