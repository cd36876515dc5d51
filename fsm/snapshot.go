package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"google.golang.org/protobuf/proto"
)

// Snapshot returns the whole state, encoded deterministically: two machines
// in the same state produce the same bytes.
func (m *Machine) Snapshot() ([]byte, error) {
	st := &statev1.State{
		Issuer:      m.issuer,
		LastToken:   uint64(m.lastToken),
		LastSession: m.lastSession,
		LeaderTerm:  m.leaderTerm,
	}
	ids := make([]uint64, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s := m.sessions[id]
		ps := &statev1.Session{Id: s.id, TtlMs: s.ttlMs, RequestId: s.requestID, SeqFloor: s.replies.floor}
		for _, r := range s.replies.list {
			ps.Replies = append(ps.Replies, &statev1.Reply{
				Seq: r.seq, Kind: int32(r.kind), Name: r.name, Token: uint64(r.token), Holder: r.holder, IssuedAtUnixMs: r.issuedAt,
			})
		}
		st.Sessions = append(st.Sessions, ps)
	}
	names := make([]string, 0, len(m.locks))
	for name := range m.locks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l := m.locks[name]
		pl := &statev1.Lock{Name: l.name, Holder: l.holder, Token: uint64(l.token), IssuedAtUnixMs: l.issuedAt}
		for _, w := range l.waiters {
			pl.Waiters = append(pl.Waiters, &statev1.Waiter{Session: w.session, Seq: w.seq})
		}
		st.Locks = append(st.Locks, pl)
	}
	st.Kv = m.kvSnapshot()
	st.Nodes = m.nodesSnapshot()
	st.KvReplies = m.kvRepliesSnapshot()
	return proto.MarshalOptions{Deterministic: true}.Marshal(st)
}

// Restore discards the whole state and replaces it with a snapshot. On error
// the machine is left empty, never half restored.
func (m *Machine) Restore(data []byte) error {
	m.reset()
	var st statev1.State
	if err := proto.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("restore: decode snapshot: %w", err)
	}
	if err := m.restore(&st); err != nil {
		m.reset()
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

func (m *Machine) restore(st *statev1.State) error {
	m.issuer = st.GetIssuer()
	m.lastToken = fence.Token(st.GetLastToken())
	m.lastSession = st.GetLastSession()
	m.leaderTerm = st.GetLeaderTerm()
	for _, ps := range st.GetSessions() {
		s := newSession(ps.GetId(), ps.GetTtlMs(), ps.GetRequestId())
		s.replies.floor = ps.GetSeqFloor()
		for _, r := range ps.GetReplies() {
			s.replies.list = append(s.replies.list, reply{
				seq: r.GetSeq(), kind: replyKind(r.GetKind()), name: r.GetName(),
				token: fence.Token(r.GetToken()), holder: r.GetHolder(), issuedAt: r.GetIssuedAtUnixMs(),
			})
		}
		m.sessions[s.id] = s
		if s.requestID != "" {
			m.byRequest[s.requestID] = s.id
		}
	}
	for _, pl := range st.GetLocks() {
		l := &lock{name: pl.GetName(), holder: pl.GetHolder(), token: fence.Token(pl.GetToken()), issuedAt: pl.GetIssuedAtUnixMs()}
		if l.holder != 0 {
			s := m.sessions[l.holder]
			if s == nil {
				return fmt.Errorf("lock %q is held by unknown session %d", l.name, l.holder)
			}
			s.held[l.name] = struct{}{}
		}
		for _, w := range pl.GetWaiters() {
			s := m.sessions[w.GetSession()]
			if s == nil {
				return fmt.Errorf("lock %q has unknown waiter session %d", l.name, w.GetSession())
			}
			s.waiting[l.name] = struct{}{}
			l.waiters = append(l.waiters, waiter{session: w.GetSession(), seq: w.GetSeq()})
		}
		m.locks[l.name] = l
	}
	m.kvRestore(st.GetKv())
	for _, r := range st.GetKvReplies() {
		m.kvReplies.put(r.GetRequestId(), KVResult{Version: r.GetVersion(), Token: fence.Token(r.GetToken()), Deleted: r.GetDeleted()})
	}
	for _, n := range st.GetNodes() {
		m.nodes[n.GetId()] = n.GetApiAddr()
	}
	return nil
}
