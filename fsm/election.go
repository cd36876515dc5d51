package fsm

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Leader election, on the shared parts: a campaign queues its session as a
// candidate (waitQueue, binding), the first candidate leads with the next
// token (its term token, from the one counter), the leader's loss (resign,
// session closed, expired or revoked) promotes the next candidate with a
// new token, and each request's result is remembered per session
// (replies). Besides the leader, an election keeps a short history of its
// changes, each with a revision from one counter of all elections, so an
// observer that reconnects (to this leader or the next) resumes without a
// gap, or learns that it missed changes.

// ElectionHistory is how many changes of each election the state keeps for
// observers that resume: one that resumes from a revision older than the
// oldest kept is told it skipped changes and gets the current state.
const ElectionHistory = 64

// MaxIdleElections is how many elections nobody leads or campaigns in
// the state keeps, each with its newest IdleElectionHistory changes, so an
// observer that saw an election up to its end, or shortly before, resumes
// without a gap. Beyond it the election idle for longest is forgotten:
// an observer resuming in it is told it skipped changes.
const (
	MaxIdleElections    = 1024
	IdleElectionHistory = 8
)

// MaxElectionValueBytes is the largest value of a candidate or leader the
// state machine takes. The server's limit (--max-election-value-bytes) is
// at most this.
const MaxElectionValueBytes = 64 << 10

// change is an election's state after one change of its leader or value.
type change struct {
	rev, prev uint64
	leader    uint64
	token     fence.Token
	value     []byte
	issuedAt  int64
}

// election is one election: its leader (0 when none) with token and value,
// its candidates in arrival order with their values, and its recent
// changes. An election with neither leader nor candidate is idle: it is
// kept, with a shorter history, among the newest MaxIdleElections idle
// ones.
type election struct {
	name     string
	leader   uint64
	token    fence.Token
	issuedAt int64
	value    []byte
	queue    waitQueue
	values   map[uint64][]byte // candidates' values, by session
	history  []change          // oldest first, at most ElectionHistory
	// floor: a resume from a revision below it may have missed changes
	// no longer in history.
	floor uint64
}

// electionTable is the leader-election primitive: every election in use,
// by name, and the revision counter of all elections.
type electionTable struct {
	m      *Machine
	byName map[string]*election
	// rev is the revision of the newest change of any election.
	rev uint64
	// forgotten is the newest revision of a forgotten idle election: a
	// name without an election may have changed up to it.
	forgotten uint64
	// idle are the idle elections, by name, the one idle for longest
	// (the lowest newest revision) first.
	idle []string
}

var _ primitive = (*electionTable)(nil)

// electionReplyName is the name an election request is remembered under in
// its session's replies, apart from a lock's or a queue's of the same name
// (dedup.go): a seq used for a campaign is never answered with a lock's
// grant, nor a lock acquire with a leader's.
func electionReplyName(name string) string { return "\x00election\x00" + name }

func newElectionTable(m *Machine) *electionTable {
	return &electionTable{m: m, byName: make(map[string]*election)}
}

// ElectionObserver is an Observer that also learns of every change of an
// election's leader or value (New finds it by type assertion). Like the
// other events it runs inside Apply and must not block.
type ElectionObserver interface {
	ElectionChanged(c ElectionChange)
}

// ElectionInfo describes an election.
type ElectionInfo struct {
	// Name is the election's name.
	Name string
	// Leader is the leader's grant (kind leader, scope the name); its
	// Token, the term token, is 0 when there is no leader.
	Leader fence.Grant
	// Value is the leader's value.
	Value []byte
	// Candidates are the queued sessions in the order they will lead.
	Candidates []uint64
	// Revision is the revision of the election's newest change; for an
	// election with neither leader nor candidate, the newest revision of
	// any election.
	Revision uint64
}

// HasLeader reports whether the election has a leader.
func (i ElectionInfo) HasLeader() bool { return i.Leader.Token != 0 }

// ElectionChange is an election's state after one change of its leader or
// its value.
type ElectionChange struct {
	// Name is the election's name.
	Name string
	// Revision orders the changes of every election; it only grows.
	Revision uint64
	// PrevRevision is the revision of the election's change before this
	// one, so an observer can tell it missed none: 0 when the election
	// had neither leader nor candidate before, or for a current state
	// that is not a change (see ElectionChanges).
	PrevRevision uint64
	// Leader is the leader's grant; Token 0 when there is none.
	Leader fence.Grant
	// Value is the leader's value.
	Value []byte
}

// dropIfIdle files an election that has neither leader nor candidate
// among the idle ones, with its newest IdleElectionHistory changes, and
// forgets the one idle for longest beyond MaxIdleElections. One that never
// had a change (its first campaign was refused) is deleted at once.
func (t *electionTable) dropIfIdle(name string) {
	e := t.byName[name]
	if e == nil || e.leader != 0 || e.queue.len() > 0 {
		return
	}
	n := len(e.history)
	if n == 0 {
		delete(t.byName, name)
		return
	}
	if slices.Contains(t.idle, name) {
		return // idle already (a refused campaign on an idle election)
	}
	if n > IdleElectionHistory {
		e.floor = e.history[n-IdleElectionHistory-1].rev
		e.history = append(e.history[:0:0], e.history[n-IdleElectionHistory:]...)
	}
	// Kept in order of the newest revision, which is what a restore
	// rebuilds: usually the newest of all, but not when the last candidate
	// leaves an election without a leader (the tokens ran out).
	newest := e.history[len(e.history)-1].rev
	i, _ := slices.BinarySearchFunc(t.idle, newest, func(name string, rev uint64) int { return cmp.Compare(t.newest(name), rev) })
	t.idle = slices.Insert(t.idle, i, name)
	if len(t.idle) > MaxIdleElections {
		old := t.byName[t.idle[0]]
		t.forgotten = max(t.forgotten, old.history[len(old.history)-1].rev)
		delete(t.byName, old.name)
		t.idle = append(t.idle[:0:0], t.idle[1:]...)
	}
}

// revive takes an idle election out of the idle ones: a campaign made it
// live again.
func (t *electionTable) revive(e *election) {
	if e.leader != 0 || e.queue.len() > 0 || len(e.history) == 0 {
		return
	}
	if i := slices.Index(t.idle, e.name); i >= 0 {
		t.idle = slices.Delete(t.idle, i, i+1)
	}
}

// grantOf is the leader's grant: kind leader, scope the election's name.
func (t *electionTable) grantOf(e *election) fence.Grant {
	return t.m.grant(fence.KindLeader, e.name, e.name, e.token, e.leader, e.issuedAt)
}

// record appends the election's current state to its history as a new
// revision and pushes it to the observer.
func (t *electionTable) record(e *election) {
	t.rev++
	c := change{rev: t.rev, leader: e.leader, token: e.token, value: e.value, issuedAt: e.issuedAt}
	if n := len(e.history); n > 0 {
		c.prev = e.history[n-1].rev
	}
	e.history = append(e.history, c)
	if len(e.history) > ElectionHistory {
		e.floor = e.history[0].rev
		e.history = append(e.history[:0:0], e.history[1:]...)
	}
	if o, ok := t.m.obs.(ElectionObserver); ok {
		o.ElectionChanged(t.changeOf(e, c))
	}
}

func (t *electionTable) changeOf(e *election, c change) ElectionChange {
	out := ElectionChange{Name: e.name, Revision: c.rev, PrevRevision: c.prev, Value: c.value}
	if c.leader != 0 {
		out.Leader = t.m.grant(fence.KindLeader, e.name, e.name, c.token, c.leader, c.issuedAt)
	}
	return out
}

func validateValue(v []byte) error {
	if len(v) > MaxElectionValueBytes {
		return fmt.Errorf("%w: value is %d bytes, larger than %d", fence.ErrInvalidArgument, len(v), MaxElectionValueBytes)
	}
	return nil
}

// session resolves the session of a campaign, resign or proclaim:
// it must be given (a candidate hangs off a session) and the request must
// carry the hash of its secret.
func (t *electionTable) session(sid uint64, secretHash []byte) (*session, error) {
	if sid == 0 {
		return nil, fmt.Errorf("%w: an election request needs a session (a candidate hangs off one)", fence.ErrInvalidArgument)
	}
	if err := validateSecretHash(secretHash); err != nil {
		return nil, err
	}
	s := t.m.sessions[sid]
	if s == nil {
		return nil, errSessionNotFound(sid)
	}
	if err := s.checkOwner(secretHash); err != nil {
		return nil, err
	}
	return s, nil
}

func (t *electionTable) campaign(c *statev1.Campaign, now int64) Result {
	m, name := t.m, c.GetName()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := validateValue(c.GetValue()); err != nil {
		return Result{Err: err}
	}
	if m.issuer == "" {
		return Result{Err: errNotInitialised()}
	}
	if m.tokens.exhausted() {
		return Result{Err: m.tokens.overflow()}
	}
	s, err := t.session(c.GetSession(), c.GetSecretHash())
	if err != nil {
		return Result{Err: err}
	}
	sid, seq := s.id, c.GetSeq()
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, electionReplyName(name))
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && rep.kind == replyWithdrawn:
			return Result{Err: fmt.Errorf("%w: request seq %d was withdrawn by a resign; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok && (rep.kind.isRelease() || rep.kind == replyProclaimed):
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for a resign or proclaim; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok && rep.kind == replyGranted:
			return Result{Session: sid, Granted: true, Grant: m.grant(fence.KindLeader, name, name, rep.token, sid, rep.issuedAt)}
		case ok && rep.kind == replyQueued:
			if e := t.byName[name]; e != nil && e.queue.queuedBy(sid, seq) {
				return Result{Session: sid, Queued: true, Holder: e.leader}
			}
			return Result{Session: sid, Holder: t.leaderOf(name)}
		}
	}
	e := t.byName[name]
	if e == nil {
		e = &election{name: name, values: make(map[uint64][]byte), floor: t.forgotten}
		t.byName[name] = e
	}
	switch {
	case e.leader == sid:
		s.replies.put(reply{seq: seq, kind: replyGranted, name: electionReplyName(name), token: e.token, issuedAt: e.issuedAt})
		return Result{Session: sid, Granted: true, Grant: t.grantOf(e)}
	case e.queue.has(sid):
		// Already a candidate: it keeps its place and its first value.
		s.replies.put(reply{seq: seq, kind: replyQueued, name: electionReplyName(name), holder: e.leader})
		return Result{Session: sid, Queued: true, Holder: e.leader}
	}
	if err := checkHoldQuota(s, c.GetQuota(), e.leader != 0 || e.queue.len() > 0); err != nil {
		t.dropIfIdle(name)
		return Result{Err: err}
	}
	t.revive(e)
	// The second-leader test fault (faults_on.go) makes the candidate
	// leader beside the one that leads, whose leadership is never ended.
	if (e.leader == 0 || m.faults.twoLeaders()) && e.queue.len() == 0 {
		g := m.issueGrant(fence.KindLeader, name, name, sid, now) // exhaustion was checked above
		e.leader, e.token, e.issuedAt, e.value = sid, g.Token, now, cloneBytes(c.GetValue())
		s.hold(kindElection, name)
		s.replies.put(reply{seq: seq, kind: replyGranted, name: electionReplyName(name), token: g.Token, issuedAt: now})
		m.obs.Granted(g)
		t.record(e)
		return Result{Session: sid, Granted: true, Grant: g}
	}
	m.enqueue(kindElection, fence.KindLeader, name, &e.queue, s, seq)
	e.values[sid] = cloneBytes(c.GetValue())
	s.replies.put(reply{seq: seq, kind: replyQueued, name: electionReplyName(name), holder: e.leader})
	return Result{Session: sid, Queued: true, Holder: e.leader}
}

func (t *electionTable) leaderOf(name string) uint64 {
	if e := t.byName[name]; e != nil {
		return e.leader
	}
	return 0
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// lead ends e's leadership, if any, and makes the first candidate the
// leader with the next token; then it records the change. reason is why
// the leadership ended.
func (t *electionTable) lead(e *election, reason EndReason, now int64) {
	m := t.m
	if e.leader != 0 {
		if s := m.sessions[e.leader]; s != nil {
			s.unhold(kindElection, e.name)
		}
		m.endGrant(e.token, reason)
		e.leader, e.token, e.issuedAt, e.value = 0, 0, 0, nil
	}
	if e.queue.len() > 0 && !m.tokens.exhausted() {
		w, g, _ := m.promote(kindElection, e.name, e.name, &e.queue, now)
		e.leader, e.token, e.issuedAt, e.value = w.session, g.Token, now, e.values[w.session]
		delete(e.values, w.session)
		m.obs.Granted(g)
	}
	t.record(e)
	t.dropIfIdle(e.name)
}

// leave takes candidate s out of e's queue; false when it was not queued.
func (t *electionTable) leave(e *election, s *session) bool {
	if !t.m.leaveQueue(kindElection, e.name, &e.queue, s) {
		return false
	}
	delete(e.values, s.id)
	t.dropIfIdle(e.name)
	return true
}

func (t *electionTable) resign(r *statev1.Resign, now int64) Result {
	m, name, sid, seq := t.m, r.GetName(), r.GetSession(), r.GetSeq()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if r.GetCancelWait() {
		return t.cancelWait(sid, name)
	}
	if err := validateSecretHash(r.GetSecretHash()); err != nil {
		return Result{Err: err}
	}
	s := m.sessions[sid]
	if s == nil {
		// A session that does not exist leads nothing and is no candidate.
		return Result{Session: sid, Release: AlreadyReleased}
	}
	if err := s.checkOwner(r.GetSecretHash()); err != nil {
		return Result{Err: err}
	}
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, electionReplyName(name))
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && !rep.kind.isRelease():
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for a campaign or proclaim; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok:
			return Result{Session: sid, Release: rep.kind.release()}
		}
	}
	e := t.byName[name]
	out := AlreadyReleased
	if w := r.GetWithdrawSeq(); w != 0 {
		res, err := t.withdraw(s, e, seq, w, name, now)
		if err != nil {
			return Result{Err: err}
		}
		out = res
	} else if e != nil {
		switch {
		case e.leader == sid:
			t.lead(e, Unlocked, now)
			out = Released
		case t.leave(e, s):
			out = Released
		case e.leader != 0:
			out = NotOwned
		}
	}
	s.replies.put(reply{seq: seq, kind: releaseReply(out), name: electionReplyName(name)})
	return Result{Session: sid, Release: out}
}

// withdraw undoes the campaign (session s, seq w) whose caller gave up on
// it, whichever of the two is applied first (see lockTable.withdraw): its
// leadership ends if s still leads with the token it won, its candidacy
// ends if it still waits, and a copy of it that arrives later is refused.
func (t *electionTable) withdraw(s *session, e *election, seq, w uint64, name string, now int64) (ReleaseResult, error) {
	if w == seq {
		return 0, fmt.Errorf("%w: withdraw seq %d is the resign's own seq; it must name the campaign to withdraw", fence.ErrInvalidArgument, w)
	}
	if w <= s.replies.floor {
		return 0, fmt.Errorf("%w: campaign seq %d is too old to withdraw (only the newest %d requests of a session are remembered)", fence.ErrInvalidArgument, w, replyWindow)
	}
	rep, ok, err := s.replies.get(w, electionReplyName(name))
	switch {
	case err != nil:
		return 0, err
	case ok && rep.kind.isRelease():
		return 0, fmt.Errorf("%w: withdraw seq %d was used for a resign, not a campaign", fence.ErrInvalidArgument, w)
	}
	out := AlreadyReleased
	switch {
	case !ok || e == nil:
	case rep.kind == replyGranted && e.leader == s.id && e.token == rep.token:
		t.lead(e, Unlocked, now)
		out = Released
	case rep.kind == replyQueued && e.queue.queuedBy(s.id, w):
		t.leave(e, s)
		out = Released
	}
	s.replies.put(reply{seq: w, kind: replyWithdrawn, name: electionReplyName(name)})
	if cur := t.byName[name]; out == AlreadyReleased && cur != nil && cur.leader != 0 && cur.leader != s.id {
		out = NotOwned
	}
	return out, nil
}

// cancelWait ends the candidacy of a campaign call whose wait ran out (the
// server proposes it). A leadership the session won meanwhile stays, and
// is returned.
func (t *electionTable) cancelWait(sid uint64, name string) Result {
	e := t.byName[name]
	if e == nil {
		return Result{Session: sid}
	}
	if e.leader != 0 && e.leader == sid {
		return Result{Session: sid, Granted: true, Grant: t.grantOf(e)}
	}
	leader := e.leader
	if s := t.m.sessions[sid]; s != nil {
		t.leave(e, s)
	}
	return Result{Session: sid, Holder: leader}
}

func (t *electionTable) proclaim(p *statev1.Proclaim, now int64) Result {
	m, name := t.m, p.GetName()
	if err := fence.ValidateName(name); err != nil {
		return Result{Err: err}
	}
	if err := validateValue(p.GetValue()); err != nil {
		return Result{Err: err}
	}
	s, err := t.session(p.GetSession(), p.GetSecretHash())
	if err != nil {
		return Result{Err: err}
	}
	sid, seq := s.id, p.GetSeq()
	if seq > 0 {
		rep, ok, err := s.replies.get(seq, electionReplyName(name))
		switch {
		case err != nil:
			return Result{Err: err}
		case ok && rep.kind != replyProclaimed:
			return Result{Err: fmt.Errorf("%w: request seq %d was already used for another request; every request needs its own seq", fence.ErrInvalidArgument, seq)}
		case ok:
			return Result{Session: sid, Granted: true, Grant: m.grant(fence.KindLeader, name, name, rep.token, sid, rep.issuedAt)}
		}
	}
	e := t.byName[name]
	if e == nil || e.leader != sid {
		return Result{Err: fmt.Errorf("%w: session %d does not lead election %q", fence.ErrNotGranted, sid, name)}
	}
	if tok := fence.Token(p.GetToken()); tok != 0 && tok != e.token {
		return Result{Err: fmt.Errorf("%w: session %d leads election %q with token %d, not %d", fence.ErrNotGranted, sid, name, e.token, tok)}
	}
	s.replies.put(reply{seq: seq, kind: replyProclaimed, name: electionReplyName(name), token: e.token, issuedAt: e.issuedAt})
	if !bytes.Equal(e.value, p.GetValue()) {
		e.value = cloneBytes(p.GetValue())
		t.record(e)
	}
	return Result{Session: sid, Granted: true, Grant: t.grantOf(e)}
}

// endSession implements primitive.
func (t *electionTable) endSession(s *session, reason EndReason, now int64) {
	s.bound(kindElection).end(func(name string) {
		t.leave(t.byName[name], s)
	}, func(name string) {
		t.lead(t.byName[name], reason, now)
	})
}

// eachGrant implements primitive: every leader's grant.
func (t *electionTable) eachGrant(fn func(tok fence.Token, g liveGrant)) {
	for _, e := range t.byName {
		if e.leader != 0 {
			fn(e.token, liveGrant{kind: kindCode(fence.KindLeader), name: e.name, scope: e.name, session: e.leader, issuedAt: e.issuedAt})
		}
	}
}

// snapshot implements section.
func (t *electionTable) snapshot(st *statev1.State) {
	st.ElectionRevision, st.ElectionForgotten = t.rev, t.forgotten
	for _, name := range sortedKeys(t.byName) {
		e := t.byName[name]
		pe := &statev1.Election{Name: e.name, Leader: e.leader, Token: uint64(e.token), IssuedAtUnixMs: e.issuedAt, Value: e.value, Floor: e.floor}
		for _, w := range e.queue.list {
			pe.Candidates = append(pe.Candidates, &statev1.Candidate{Session: w.session, Seq: w.seq, Value: e.values[w.session]})
		}
		for _, c := range e.history {
			pe.History = append(pe.History, &statev1.ElectionChange{Revision: c.rev, PrevRevision: c.prev, Leader: c.leader, Token: uint64(c.token), Value: c.value, IssuedAtUnixMs: c.issuedAt})
		}
		st.Elections = append(st.Elections, pe)
	}
}

// restore implements section.
func (t *electionTable) restore(st *statev1.State) error {
	t.rev, t.forgotten = st.GetElectionRevision(), st.GetElectionForgotten()
	for _, pe := range st.GetElections() {
		e := &election{name: pe.GetName(), leader: pe.GetLeader(), token: fence.Token(pe.GetToken()), issuedAt: pe.GetIssuedAtUnixMs(),
			value: cloneBytes(pe.GetValue()), values: make(map[uint64][]byte), floor: pe.GetFloor()}
		if _, dup := t.byName[e.name]; dup {
			return broken("the snapshot lists election %q twice", e.name)
		}
		if e.leader != 0 {
			s := t.m.sessions[e.leader]
			if s == nil {
				return fmt.Errorf("election %q is led by unknown session %d", e.name, e.leader)
			}
			s.hold(kindElection, e.name)
		}
		for _, c := range pe.GetCandidates() {
			s := t.m.sessions[c.GetSession()]
			if s == nil {
				return fmt.Errorf("election %q has unknown candidate session %d", e.name, c.GetSession())
			}
			s.wait(kindElection, e.name)
			e.queue.list = append(e.queue.list, waiter{session: c.GetSession(), seq: c.GetSeq(), kind: fence.KindLeader})
			e.values[c.GetSession()] = cloneBytes(c.GetValue())
		}
		for _, c := range pe.GetHistory() {
			e.history = append(e.history, change{rev: c.GetRevision(), prev: c.GetPrevRevision(), leader: c.GetLeader(), token: fence.Token(c.GetToken()),
				value: cloneBytes(c.GetValue()), issuedAt: c.GetIssuedAtUnixMs()})
		}
		t.byName[e.name] = e
		if e.leader == 0 && e.queue.len() == 0 {
			t.idle = append(t.idle, e.name)
		}
	}
	slices.SortFunc(t.idle, func(a, b string) int { return cmp.Compare(t.newest(a), t.newest(b)) })
	return nil
}

// newest is the revision of election name's newest change (0 for none).
func (t *electionTable) newest(name string) uint64 {
	if e := t.byName[name]; e != nil && len(e.history) > 0 {
		return e.history[len(e.history)-1].rev
	}
	return 0
}

// Election describes one election; one with neither leader nor candidate
// reports a zero Leader and the newest revision of any election.
func (m *Machine) Election(name string) ElectionInfo {
	t := m.elections
	e := t.byName[name]
	if e == nil {
		return ElectionInfo{Name: name, Revision: t.rev}
	}
	info := ElectionInfo{Name: name, Value: e.value, Candidates: e.queue.sessions(), Revision: e.history[len(e.history)-1].rev}
	if e.leader != 0 {
		info.Leader = t.grantOf(e)
	}
	return info
}

// ElectionChanges returns what an observer of election name that has seen
// every change up to revision after must see next: the changes after it,
// oldest first (none when it is up to date). With after 0 (a new
// observer), or when some change after it is no longer kept (skipped), it
// is the current state alone, whose PrevRevision is 0. skipped may be
// reported when the observer missed nothing of this election (another
// election's deletion raised the floor), never the other way round. A
// revision above the newest one is refused: it comes from another cluster.
func (m *Machine) ElectionChanges(name string, after uint64) (changes []ElectionChange, skipped bool, err error) {
	t := m.elections
	if after > t.rev {
		return nil, false, fmt.Errorf("%w: revision %d is above the newest election revision %d (a revision of another cluster?)", fence.ErrInvalidArgument, after, t.rev)
	}
	e := t.byName[name]
	if e == nil {
		if after != 0 && after >= t.forgotten {
			return nil, false, nil
		}
		return []ElectionChange{{Name: name, Revision: t.rev}}, after != 0, nil
	}
	if after == 0 || after < e.floor {
		c := t.changeOf(e, e.history[len(e.history)-1])
		c.PrevRevision = 0
		return []ElectionChange{c}, after != 0, nil
	}
	for _, c := range e.history {
		if c.rev > after {
			changes = append(changes, t.changeOf(e, c))
		}
	}
	return changes, false, nil
}

// ElectionRevision returns the revision of the newest change of any
// election.
func (m *Machine) ElectionRevision() uint64 { return m.elections.rev }

// LedElectionCount returns the number of elections with a leader.
func (m *Machine) LedElectionCount() int {
	n := 0
	for _, e := range m.elections.byName {
		if e.leader != 0 {
			n++
		}
	}
	return n
}

// CandidateCount returns the number of queued candidates over all
// elections.
func (m *Machine) CandidateCount() int {
	n := 0
	for _, e := range m.elections.byName {
		n += e.queue.len()
	}
	return n
}

// check reports an election whose leader or candidates are not live
// sessions bound to it, a leader without a token or with one above the
// counter, two leaders with one token, an idle election kept, a value too
// large, or a history that is empty, too long, out of order, linked
// wrongly, ahead of the revision counter or not ending in the current
// state; and a session bound to an election that does not list it.
func (t *electionTable) check() error {
	m := t.m
	if t.forgotten > t.rev {
		return broken("election revision %d is below the forgotten revision %d", t.rev, t.forgotten)
	}
	if len(t.idle) > MaxIdleElections {
		return broken("%d idle elections, more than %d", len(t.idle), MaxIdleElections)
	}
	for i, name := range t.idle {
		if e := t.byName[name]; e == nil || (i > 0 && t.newest(t.idle[i-1]) >= t.newest(name)) {
			return broken("idle election %q is not an election, or out of order", name)
		}
	}
	tokens := make(map[fence.Token]string, len(t.byName))
	for name, e := range t.byName {
		if e.name != name {
			return broken("election %q is filed under %q", e.name, name)
		}
		if err := storedName(name); err != nil {
			return broken("election %q: %v", name, err)
		}
		if idle := e.leader == 0 && e.queue.len() == 0; idle != slices.Contains(t.idle, name) {
			return broken("election %q is idle %v, but the idle list says otherwise", name, idle)
		} else if idle && len(e.history) > IdleElectionHistory {
			return broken("idle election %q keeps %d changes, more than %d", name, len(e.history), IdleElectionHistory)
		}
		if len(e.value) > MaxElectionValueBytes {
			return broken("election %q has a value of %d bytes", name, len(e.value))
		}
		if e.leader == 0 && (e.token != 0 || e.value != nil) {
			return broken("election %q has no leader but token %d and a value", name, e.token)
		}
		if e.leader != 0 {
			s := m.sessions[e.leader]
			switch {
			case s == nil:
				return broken("election %q is led by session %d, which is not live", name, e.leader)
			case !e.token.Valid() || e.token > m.tokens.last:
				return broken("election %q has token %d; want 1 to the last token %d", name, e.token, m.tokens.last)
			case tokens[e.token] != "":
				return broken("elections %q and %q hold the same token %d", tokens[e.token], name, e.token)
			}
			if !s.bound(kindElection).held.has(name) {
				return broken("election %q is led by session %d, which is not bound to it", name, e.leader)
			}
			tokens[e.token] = name
		}
		if len(e.values) != e.queue.len() {
			return broken("election %q has %d candidates but %d candidate values", name, e.queue.len(), len(e.values))
		}
		queued := make(map[uint64]bool, e.queue.len())
		for _, w := range e.queue.list {
			s := m.sessions[w.session]
			_, hasValue := e.values[w.session]
			switch {
			case s == nil:
				return broken("session %d is a candidate of %q but is not live", w.session, name)
			case queued[w.session]:
				return broken("session %d is a candidate of %q twice", w.session, name)
			case w.session == e.leader:
				return broken("session %d is a candidate of %q, which it leads", w.session, name)
			case !hasValue || len(e.values[w.session]) > MaxElectionValueBytes:
				return broken("candidate %d of %q has no value or one too large", w.session, name)
			}
			if !s.bound(kindElection).waiting.has(name) {
				return broken("session %d is a candidate of %q but is not bound to it", w.session, name)
			}
			queued[w.session] = true
		}
		if err := e.checkHistory(t.rev); err != nil {
			return broken("election %q: %v", name, err)
		}
	}
	for _, s := range m.checked.others {
		id, b := s.id, s.bound(kindElection)
		for name := range b.held.all() {
			if e := t.byName[name]; e == nil || e.leader != id {
				return broken("session %d is bound as leader of %q, which it does not lead", id, name)
			}
		}
		for name := range b.waiting.all() {
			if e := t.byName[name]; e == nil || !e.queue.has(id) {
				return broken("session %d is bound as candidate of %q, which does not queue it", id, name)
			}
		}
	}
	return nil
}

// checkHistory reports a history that is empty, longer than
// ElectionHistory, not strictly increasing up to at most rev, with a
// change whose previous revision is not the one before it, with a floor
// not below its first change, or whose newest change is not the current
// state.
func (e *election) checkHistory(rev uint64) error {
	n := len(e.history)
	if n == 0 || n > ElectionHistory {
		return fmt.Errorf("history of %d changes; want 1 to %d", n, ElectionHistory)
	}
	if e.floor >= e.history[0].rev {
		return fmt.Errorf("floor %d is not below the first revision %d", e.floor, e.history[0].rev)
	}
	for i, c := range e.history {
		switch {
		case c.rev > rev:
			return fmt.Errorf("change %d is above the revision counter %d", c.rev, rev)
		case i > 0 && c.rev <= e.history[i-1].rev:
			return fmt.Errorf("change %d follows change %d", c.rev, e.history[i-1].rev)
		case i > 0 && c.prev != e.history[i-1].rev:
			return fmt.Errorf("change %d names %d as its previous, want %d", c.rev, c.prev, e.history[i-1].rev)
		case c.prev >= c.rev:
			return fmt.Errorf("change %d names %d as its previous", c.rev, c.prev)
		case (c.leader == 0) != (c.token == 0):
			return fmt.Errorf("change %d has leader %d with token %d", c.rev, c.leader, c.token)
		case len(c.value) > MaxElectionValueBytes:
			return fmt.Errorf("change %d has a value of %d bytes", c.rev, len(c.value))
		}
	}
	last := e.history[n-1]
	if last.leader != e.leader || last.token != e.token || !bytes.Equal(last.value, e.value) {
		return fmt.Errorf("newest change %d (leader %d, token %d) is not the current state (leader %d, token %d)", last.rev, last.leader, last.token, e.leader, e.token)
	}
	return nil
}
