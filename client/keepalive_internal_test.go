package client

import (
	"testing"
	"time"
)

// A stream is given up for a renewal left unanswered past its answer
// timeout only while the stream answers nothing else either, or once it
// answered a renewal sent after that one (the server answers in order, so
// that one was lost); a stream that is slow but answering is kept.
func TestKeeper_OverdueOnlyWhenSilentOrSkipped(t *testing.T) {
	c := &Client{requestTimeout: time.Minute}
	s := &Session{c: c, id: 1, ttl: 6 * time.Second}
	timeout := answerTimeout(s) // a sixth of the TTL
	if timeout != time.Second {
		t.Fatalf("answerTimeout = %v, want 1s", timeout)
	}
	t0 := time.Unix(1000, 0)
	setup := func() (*keeper, *kaStream) {
		k := newKeeper(c)
		st := &kaStream{k: k}
		k.pending[5] = pendingRenewal{s: s, sent: t0, st: st}
		return k, st
	}

	k, st := setup()
	if k.overdueLocked(st, t0.Add(timeout-time.Millisecond)) {
		t.Error("overdue before its answer timeout")
	}
	if !k.overdueLocked(st, t0.Add(timeout)) {
		t.Error("a silent stream is not overdue at the answer timeout")
	}

	k, st = setup()
	st.answered = t0.Add(900 * time.Millisecond) // answers to other renewals
	if k.overdueLocked(st, t0.Add(timeout)) {
		t.Error("a stream that answered 100ms ago was given up")
	}
	if at := k.pending[5].overdueAt(); !at.Equal(st.answered.Add(timeout)) {
		t.Errorf("overdueAt = %v, want the last answer + timeout %v", at, st.answered.Add(timeout))
	}
	if !k.overdueLocked(st, st.answered.Add(timeout)) {
		t.Error("not overdue once the stream fell silent for the answer timeout")
	}

	k, st = setup()
	st.answered, st.answeredNonce = t0.Add(900*time.Millisecond), 6
	if !k.overdueLocked(st, t0.Add(timeout)) {
		t.Error("a renewal skipped by the answers (a later one answered) kept the stream")
	}
	if k.overdueLocked(st, t0.Add(timeout-time.Millisecond)) {
		t.Error("a skipped renewal made the stream overdue before its own answer timeout")
	}
	other := &kaStream{k: k}
	if k.overdueLocked(other, t0.Add(10*timeout)) {
		t.Error("a renewal sent on another stream made this one overdue")
	}
}

// The schedule is looked at every 50ms for a few sessions, less often for
// many (scanSpacing each), but never less often than a thirtieth of the
// shortest TTL.
func TestKeeper_ScheduleSlackGrowsWithSessions(t *testing.T) {
	for _, c := range []struct {
		sessions int
		ttl      time.Duration
		want     time.Duration
	}{
		{10, time.Minute, 50 * time.Millisecond},
		{100000, time.Minute, 200 * time.Millisecond},
		{1000000, time.Minute, 2 * time.Second},
		{10000000, time.Minute, 2 * time.Second},
		{1000000, time.Second, time.Second / 30},
		{10, 300 * time.Millisecond, 10 * time.Millisecond},
	} {
		if got := scheduleSlack(renewalSlack(c.ttl), c.ttl, c.sessions); got != c.want {
			t.Errorf("%d sessions of TTL %v: slack %v, want %v", c.sessions, c.ttl, got, c.want)
		}
	}
}
