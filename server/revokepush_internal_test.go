package server

import (
	"testing"
	"time"
)

// A revoked session is pushed to the stream that renewed it last, while
// that stream is open, and to no other; an expiry pushes nothing.
func TestRevokePush_LastRenewingStream(t *testing.T) {
	l, _ := expiryOf(4, time.Minute)
	p := newRevokePush()
	a, b, c := p.stream(), p.stream(), p.stream()
	if a.number() == 0 || a.number() == b.number() || b.number() == c.number() {
		t.Fatalf("stream numbers %d, %d, %d: want distinct and not 0", a.number(), b.number(), c.number())
	}
	renew := func(id uint64, ps *pushStream) {
		t.Helper()
		if _, ok := l.renew(id, ps.number()); !ok {
			t.Fatalf("renewal of session %d failed", id)
		}
	}
	renew(1, a)
	renew(1, b) // the client moved to b
	renew(1, nil)
	renew(2, c)
	renew(3, b)
	renew(4, c)
	c.done()
	p.ended(1, l.end(1), true)
	p.ended(2, l.end(2), true) // its stream is done
	p.ended(3, l.end(3), false)
	if got := b.take(); len(got) != 1 || got[0].Session != 1 || !got[0].Revoked || !got[0].Gone || got[0].Nonce != 0 {
		t.Errorf("stream b got %v, want one revocation of session 1", got)
	}
	for name, ps := range map[string]*pushStream{"a (renewed before b)": a, "c (done)": c} {
		if got := ps.take(); len(got) != 0 {
			t.Errorf("stream %s got %v", name, got)
		}
	}
	if len(p.streams) != 2 {
		t.Errorf("%d streams registered, want a and b", len(p.streams))
	}
	// A session whose stream is done is pushed nowhere, and a stream
	// opened since does not take the done one's number.
	d := p.stream()
	if d.number() == c.number() {
		t.Errorf("a new stream reused the number %d of a done one", c.number())
	}
	p.ended(4, l.end(4), true)
	if got := d.take(); len(got) != 0 {
		t.Errorf("a stream that never renewed session 4 got %v", got)
	}
}

// Stream numbers skip 0 and the numbers of open streams when they wrap.
func TestRevokePush_NumbersWrap(t *testing.T) {
	p := newRevokePush()
	p.last = ^uint32(0) - 1
	a := p.stream() // the last number
	p.last = ^uint32(0) - 1
	b := p.stream()
	if a.number() != ^uint32(0) || b.number() != 1 {
		t.Errorf("numbers %d, %d: want %d, then 1 (0 is none, %d is open)", a.number(), b.number(), ^uint32(0), ^uint32(0))
	}
}
