package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// recvState receives the next state of an observation, bounded.
func recvState(t *testing.T, ch <-chan client.ElectionState) client.ElectionState {
	t.Helper()
	select {
	case st, ok := <-ch:
		if !ok {
			t.Fatal("observation closed")
		}
		return st
	case <-time.After(20 * time.Second):
		t.Fatal("no election state within 20s")
	}
	return client.ElectionState{}
}

// Campaign, Proclaim, Resign and the next candidate's promotion, seen by
// the candidates and by an observer: the observer gets the current state
// first, then every change in order, each linked to the one before; the
// term tokens rise; proclaim keeps the token; Done closes on Resign and on
// the session's loss.
func TestElection_CampaignProclaimResignObserve(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	s1, s2 := newSession(t, c), newSession(t, c)
	e1, e2 := client.NewElection(s1, "svc"), client.NewElection(s2, "svc")

	if _, err := c.ElectionLeader(ctx, "svc"); !errors.Is(err, client.ErrElectionNoLeader) {
		t.Fatalf("Leader of an empty election: %v, want ErrElectionNoLeader", err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	obs := c.ObserveElection(octx, "svc")
	if st := recvState(t, obs); st.HasLeader() {
		t.Fatalf("first state %+v, want no leader", st)
	}

	t1, err := e1.Campaign(ctx, "a:1")
	if err != nil || !t1.Valid() || e1.Token() != t1 {
		t.Fatalf("Campaign = %v, %v; Token() %v", t1, err, e1.Token())
	}
	if g := e1.Grant(); g.Kind != fence.KindLeader || g.Scope != "svc" || g.Session != s1.ID() {
		t.Fatalf("Grant() = %+v, want kind leader, scope svc, session %d", g, s1.ID())
	}
	st := recvState(t, obs)
	if st.Leader.Token != t1 || st.Value != "a:1" || st.PrevRevision != 0 {
		t.Fatalf("state after the first campaign %+v, want token %v value a:1", st, t1)
	}
	prev := st.Revision

	won := make(chan fence.Token, 1)
	go func() {
		tok, err := e2.Campaign(ctx, "b:2")
		if err != nil {
			t.Errorf("second Campaign: %v", err)
		}
		won <- tok
	}()
	// The second candidate waits: the leader proclaims meanwhile.
	eventuallyC(t, "the second candidate queued", func() bool {
		l, err := c.ElectionLeader(ctx, "svc")
		return err == nil && l.Candidates == 1
	})
	if err := e1.Proclaim(ctx, "a:2"); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	if err := e2.Proclaim(ctx, "b:x"); !errors.Is(err, client.ErrElectionNotLeader) {
		t.Fatalf("Proclaim by a candidate: %v, want ErrElectionNotLeader", err)
	}
	st = recvState(t, obs)
	if st.Leader.Token != t1 || st.Value != "a:2" || st.PrevRevision != prev {
		t.Fatalf("state after proclaim %+v, want token %v value a:2 after revision %d", st, t1, prev)
	}
	prev = st.Revision
	if l, err := e2.Leader(ctx); err != nil || l.Value != "a:2" || l.Leader.Token != t1 {
		t.Fatalf("Leader = %+v, %v; want a:2 under %v", l, err, t1)
	}

	done := e1.Done()
	if err := e1.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	bounded.Recv(t, "Done after Resign", 5*time.Second, done)
	var t2 fence.Token
	select {
	case t2 = <-won:
	case <-time.After(20 * time.Second):
		t.Fatal("the second candidate was not elected after the leader resigned")
	}
	if t2 <= t1 {
		t.Fatalf("next term token %v, not above %v", t2, t1)
	}
	st = recvState(t, obs)
	if st.Leader.Token != t2 || st.Value != "b:2" || st.PrevRevision != prev {
		t.Fatalf("state after the resign %+v, want token %v value b:2 after revision %d", st, t2, prev)
	}
	prev = st.Revision

	// The leader's session ends: Done closes, nobody leads.
	done = e2.Done()
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bounded.Recv(t, "Done after the session closed", 5*time.Second, done)
	st = recvState(t, obs)
	if st.HasLeader() || st.PrevRevision != prev {
		t.Fatalf("state after the leader's session closed %+v, want no leader after %d", st, prev)
	}
}

// A campaign whose context ends while it waits leaves no candidate behind:
// the next campaign is elected as soon as the leader resigns.
func TestElection_CampaignCancelled(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	s1, s2, s3 := newSession(t, c), newSession(t, c), newSession(t, c)
	e1 := client.NewElection(s1, "c")
	if _, err := e1.Campaign(ctx, ""); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := client.NewElection(s2, "c").Campaign(wctx, "")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Campaign: %v, want DeadlineExceeded", err)
	}
	if l, err := c.ElectionLeader(ctx, "c"); err != nil || l.Candidates != 0 {
		t.Fatalf("after the cancelled campaign: %+v, %v; want no candidate", l, err)
	}
	e3 := client.NewElection(s3, "c")
	won := make(chan error, 1)
	go func() { _, err := e3.Campaign(ctx, ""); won <- err }()
	eventuallyC(t, "the third candidate queued", func() bool {
		l, err := c.ElectionLeader(ctx, "c")
		return err == nil && l.Candidates == 1
	})
	e1.Resign(ctx)
	if err := <-won; err != nil {
		t.Fatal(err)
	}
	if l, _ := c.ElectionLeader(ctx, "c"); l.Leader.Session != s3.ID() {
		t.Fatalf("leader %d, want session %d", l.Leader.Session, s3.ID())
	}
}

// Bad input is refused before anything changes: a malformed name, a value
// above the server's limit.
func TestElection_BadInput(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	s := newSession(t, c)
	for _, name := range []string{"", "a\x00b", string(make([]byte, 513))} {
		if _, err := client.NewElection(s, name).Campaign(ctx, ""); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Campaign(%q): %v, want ErrInvalidArgument", name, err)
		}
		if _, err := c.ElectionLeader(ctx, name); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Leader(%q): %v, want ErrInvalidArgument", name, err)
		}
	}
	big := string(make([]byte, 4097))
	if _, err := client.NewElection(s, "v").Campaign(ctx, big); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Errorf("Campaign with a 4097-byte value: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.ElectionLeader(ctx, "v"); !errors.Is(err, client.ErrElectionNoLeader) {
		t.Errorf("after the refused campaign: %v, want no leader", err)
	}
	if _, ok := <-c.ObserveElection(ctx, "a\x00b"); ok {
		t.Error("observing a malformed name delivered a state")
	}
}

func eventuallyC(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
