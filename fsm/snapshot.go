package fsm

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Snapshot returns the whole state, encoded deterministically: two machines
// in the same state produce the same bytes. The Machine writes the
// counters and the sessions (with their de-duplication tables); every
// section (each primitive, the kv, the nodes) writes its own fields.
func (m *Machine) Snapshot() ([]byte, error) {
	st := &statev1.State{
		Issuer:        m.issuer,
		LastToken:     uint64(m.tokens.last),
		LastSession:   m.lastSession,
		LeaderTerm:    m.leaderTerm,
		ReservedToken: uint64(m.tokens.reserved),
		ReserveBlock:  uint64(m.tokens.block),
		FormatVersion: FormatVersion,
		Lineage:       m.Lineage(),
	}
	ids := make([]uint64, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s := m.sessions[id]
		ps := &statev1.Session{Id: s.id, TtlMs: s.ttl(), RequestId: s.requestID, SeqFloor: s.replies.floor, Owner: s.owner(), SecretHash: s.secret()}
		for _, r := range s.replies.list {
			ps.Replies = append(ps.Replies, &statev1.Reply{
				Seq: r.seq, Kind: int32(r.kind), Name: r.name, Token: uint64(r.token), Holder: r.holder, IssuedAtUnixMs: r.issuedAt,
			})
		}
		st.Sessions = append(st.Sessions, ps)
	}
	for _, sec := range m.sections {
		sec.snapshot(st)
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(st)
}

// Restore discards the whole state and replaces it with a snapshot. A
// snapshot that decodes but describes a state no sequence of commands
// could reach (a holder or waiter that is not a live session, a token
// above the counter, a key listed twice, a TTL out of range...) is refused
// (invariants.go); so is one holding a field or enum value this build does
// not know (a newer release wrote it: an error matching ErrFormatVersion). On error the machine is left empty, never half
// restored.
func (m *Machine) Restore(data []byte) error {
	m.reset()
	var st statev1.State
	if err := proto.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("restore: decode snapshot: %w", err)
	}
	if err := checkFormat("the snapshot", st.GetFormatVersion()); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := checkKnown(st.ProtoReflect(), "the snapshot", 0, false); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	err := m.restore(&st)
	var liveErr error
	if err == nil {
		liveErr = m.rebuildLive()
		err = m.checkRestored(&st)
	}
	if err == nil {
		// After the checks, whose errors say more (which locks share a
		// token), as checkLive's came after them.
		err = liveErr
	}
	if err != nil {
		m.reset()
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

func (m *Machine) restore(st *statev1.State) error {
	m.issuer = st.GetIssuer()
	m.tokens.last = fence.Token(st.GetLastToken())
	m.tokens.reserved = fence.Token(st.GetReservedToken())
	m.tokens.block = fence.Token(st.GetReserveBlock())
	if m.tokens.reserved > fence.MaxToken || m.tokens.block > maxReserveBlock || (m.tokens.block > 0) != (m.tokens.reserved > 0) {
		return fmt.Errorf("token reservation %d with block %d is out of range (block 1 to %d with a reservation, 0 without)", m.tokens.reserved, m.tokens.block, maxReserveBlock)
	}
	for _, e := range st.GetLineage() {
		m.lineage = append(m.lineage, proto.Clone(e).(*statev1.IssuerEpoch))
	}
	m.lastSession = st.GetLastSession()
	m.leaderTerm = st.GetLeaderTerm()
	// Sized once: growing maps of a million sessions rehashes them many
	// times.
	m.sessions = make(map[uint64]*session, len(st.GetSessions()))
	m.byRequest = make(map[string]uint64, len(st.GetSessions()))
	for _, ps := range st.GetSessions() {
		// The TTL is checked here, not only with the invariants, as the
		// session keeps it in 32 bits.
		if err := fence.ValidateTTLMillis(ps.GetTtlMs()); err != nil {
			return broken("session %d: %v", ps.GetId(), err)
		}
		s := &session{id: ps.GetId(), ttlMs: int32(ps.GetTtlMs()), requestID: ps.GetRequestId()}
		if h := ps.GetSecretHash(); len(h) > 0 {
			if err := validateSecretHash(h); err != nil {
				return fmt.Errorf("session %d: %w", s.id, err)
			}
			s.setSecret(h)
		}
		s.replies.floor = ps.GetSeqFloor()
		for _, r := range ps.GetReplies() {
			s.replies.list = append(s.replies.list, reply{
				seq: r.GetSeq(), kind: replyKind(r.GetKind()), name: r.GetName(),
				token: fence.Token(r.GetToken()), holder: r.GetHolder(), issuedAt: r.GetIssuedAtUnixMs(),
			})
		}
		m.addSession(s, ps.GetOwner())
	}
	for _, sec := range m.sections {
		if err := sec.restore(st); err != nil {
			return err
		}
	}
	return nil
}
