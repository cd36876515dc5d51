package server

import (
	"sync"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// revokePush tells KeepAlive streams at once that a session they renew was
// revoked, so the holder's SDK cancels its grants without waiting for its
// next renewal. A stream is registered for a session once it renewed it
// with the session's secret. The push is only the fast path: a stream that
// misses it (it was reconnecting) learns the session is gone from its next
// renewal.
type revokePush struct {
	mu        sync.Mutex
	bySession map[uint64]pushSet
}

func newRevokePush() *revokePush {
	return &revokePush{bySession: make(map[uint64]pushSet)}
}

// pushSet is the streams registered for one session. Nearly every session
// is renewed by one stream, kept in one without a map of its own (a map a
// session cost about 200 bytes a live session); more holds the others
// while a client moves between streams.
type pushSet struct {
	one  *pushStream
	more map[*pushStream]struct{}
}

// add returns the set with ps in it.
func (s pushSet) add(ps *pushStream) pushSet {
	switch {
	case s.one == nil || s.one == ps:
		s.one = ps
	default:
		if s.more == nil {
			s.more = make(map[*pushStream]struct{})
		}
		s.more[ps] = struct{}{}
	}
	return s
}

// remove returns the set without ps, and whether it is empty.
func (s pushSet) remove(ps *pushStream) (pushSet, bool) {
	if s.one == ps {
		s.one = nil
		for other := range s.more { // promote any one of the others
			s.one = other
			delete(s.more, other)
			break
		}
	} else {
		delete(s.more, ps)
	}
	return s, s.one == nil
}

// each calls fn for every stream of the set.
func (s pushSet) each(fn func(*pushStream)) {
	if s.one != nil {
		fn(s.one)
	}
	for ps := range s.more {
		fn(ps)
	}
}

// pushStream is one KeepAlive stream's inbox of pushed answers.
type pushStream struct {
	p      *revokePush
	signal chan struct{} // capacity 1: pending changed

	mu      sync.Mutex
	pending []*fencedv1.KeepAliveResponse
	renews  map[uint64]struct{} // sessions registered for this stream
}

// stream returns a new stream's inbox; call done when the stream ends.
func (p *revokePush) stream() *pushStream {
	return &pushStream{p: p, signal: make(chan struct{}, 1), renews: make(map[uint64]struct{})}
}

// renewed registers ps for session: it renewed it with the secret.
func (ps *pushStream) renewed(session uint64) {
	ps.mu.Lock()
	_, known := ps.renews[session]
	if !known {
		ps.renews[session] = struct{}{}
	}
	ps.mu.Unlock()
	if known {
		return
	}
	ps.p.mu.Lock()
	defer ps.p.mu.Unlock()
	ps.p.bySession[session] = ps.p.bySession[session].add(ps)
}

// take returns the pushed answers not yet sent.
func (ps *pushStream) take() []*fencedv1.KeepAliveResponse {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := ps.pending
	ps.pending = nil
	return out
}

// done unregisters the stream.
func (ps *pushStream) done() {
	ps.mu.Lock()
	ids := ps.renews
	ps.renews = nil
	ps.mu.Unlock()
	ps.p.mu.Lock()
	defer ps.p.mu.Unlock()
	for id := range ids {
		set, ok := ps.p.bySession[id]
		if !ok {
			continue
		}
		if set, empty := set.remove(ps); empty {
			delete(ps.p.bySession, id)
		} else {
			ps.p.bySession[id] = set
		}
	}
}

// ended forgets session, and when it was revoked pushes a "gone, revoked"
// answer (nonce 0) to every stream that renewed it. It runs inside Apply
// and never blocks.
func (p *revokePush) ended(session uint64, revoked bool) {
	p.mu.Lock()
	set := p.bySession[session]
	delete(p.bySession, session)
	p.mu.Unlock()
	set.each(func(ps *pushStream) {
		ps.mu.Lock()
		live := ps.renews != nil
		if live {
			delete(ps.renews, session)
			if revoked {
				ps.pending = append(ps.pending, &fencedv1.KeepAliveResponse{Session: session, Gone: true, Revoked: true,
					Error: "the session was revoked by an administrator"})
			}
		}
		ps.mu.Unlock()
		if live && revoked {
			select {
			case ps.signal <- struct{}{}:
			default:
			}
		}
	})
}
