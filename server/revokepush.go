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
	bySession map[uint64]map[*pushStream]struct{}
}

func newRevokePush() *revokePush {
	return &revokePush{bySession: make(map[uint64]map[*pushStream]struct{})}
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
	ps.renews[session] = struct{}{}
	ps.mu.Unlock()
	if known {
		return
	}
	ps.p.mu.Lock()
	defer ps.p.mu.Unlock()
	set := ps.p.bySession[session]
	if set == nil {
		set = make(map[*pushStream]struct{})
		ps.p.bySession[session] = set
	}
	set[ps] = struct{}{}
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
		if set := ps.p.bySession[id]; set != nil {
			delete(set, ps)
			if len(set) == 0 {
				delete(ps.p.bySession, id)
			}
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
	for ps := range set {
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
	}
}
