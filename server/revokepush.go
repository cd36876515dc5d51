package server

import (
	"sync"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// revokePush tells KeepAlive streams at once that a session they renew was
// revoked, so the holder's SDK cancels its grants without waiting for its
// next renewal. Every stream has a number; the session's entry in the
// expiry table keeps the number of the stream that renewed it last
// (sessionDeadline.stream), and when the session ends the table hands it
// here (ended). The push is only the fast path: a stream that misses it
// (it was reconnecting, or the client renewed on another stream since)
// learns the session is gone from its next renewal.
//
// A stream that is done is only taken out of streams: the sessions that
// still name it are not walked (a million at scale), and a push to a
// number that names no stream is dropped.
type revokePush struct {
	mu      sync.Mutex
	last    uint32 // the number given to the newest stream
	streams map[uint32]*pushStream
}

func newRevokePush() *revokePush {
	return &revokePush{streams: make(map[uint32]*pushStream)}
}

// pushStream is one KeepAlive stream's inbox of pushed answers.
type pushStream struct {
	p      *revokePush
	id     uint32        // its number, never 0
	signal chan struct{} // capacity 1: pending changed

	mu      sync.Mutex
	pending []*fencedv1.KeepAliveResponse
}

// stream returns a new stream's inbox; call done when the stream ends.
// Numbers are not reused while their stream is open; after 2^32 streams
// one may name a stream that a finished session once named too, which
// would push the truth (that session was revoked) to a stream that does
// not renew it.
func (p *revokePush) stream() *pushStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		p.last++
		if _, open := p.streams[p.last]; p.last != 0 && !open {
			break
		}
	}
	ps := &pushStream{p: p, id: p.last, signal: make(chan struct{}, 1)}
	p.streams[ps.id] = ps
	return ps
}

// number returns the stream's number, 0 for no stream (nil).
func (ps *pushStream) number() uint32 {
	if ps == nil {
		return 0
	}
	return ps.id
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
	ps.p.mu.Lock()
	defer ps.p.mu.Unlock()
	delete(ps.p.streams, ps.id)
}

// ended is told that session ended, renewed last on the stream numbered
// stream (0 if none); when it was revoked it pushes a "gone, revoked"
// answer (nonce 0) to that stream if it is still open. It runs inside
// Apply and never blocks.
func (p *revokePush) ended(session uint64, stream uint32, revoked bool) {
	if !revoked || stream == 0 {
		return
	}
	p.mu.Lock()
	ps := p.streams[stream]
	p.mu.Unlock()
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.pending = append(ps.pending, &fencedv1.KeepAliveResponse{Session: session, Gone: true, Revoked: true,
		Error: "the session was revoked by an administrator"})
	ps.mu.Unlock()
	select {
	case ps.signal <- struct{}{}:
	default:
	}
}
