package server

import "testing"

// A session renewed by several streams (a client moving between them) is
// pushed to every one still registered, and to none that is done.
func TestRevokePush_EveryRegisteredStream(t *testing.T) {
	p := newRevokePush()
	a, b, c := p.stream(), p.stream(), p.stream()
	for _, ps := range []*pushStream{a, b, c, a} { // a twice: registered once
		ps.renewed(7)
	}
	b.renewed(8)
	b.done() // b goes: 7 stays with a and c, 8 with nobody
	p.ended(7, true)
	p.ended(8, true)
	for name, ps := range map[string]*pushStream{"a": a, "c": c} {
		got := ps.take()
		if len(got) != 1 || got[0].Session != 7 || !got[0].Revoked {
			t.Errorf("stream %s got %v, want one revocation of session 7", name, got)
		}
	}
	if got := b.take(); len(got) != 0 {
		t.Errorf("a stream that was done got %v", got)
	}
	if len(p.bySession) != 0 {
		t.Errorf("sessions left registered: %v", p.bySession)
	}

	// The first stream going leaves the others registered.
	a, c = p.stream(), p.stream()
	a.renewed(9)
	c.renewed(9)
	a.done()
	p.ended(9, true)
	if got := c.take(); len(got) != 1 {
		t.Errorf("the stream left after the first one went got %v, want the revocation", got)
	}
	// A session that ended without a revocation pushes nothing.
	c.renewed(10)
	p.ended(10, false)
	if got := c.take(); len(got) != 0 {
		t.Errorf("an expiry was pushed: %v", got)
	}
}
