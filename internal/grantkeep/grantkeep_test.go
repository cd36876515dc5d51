package grantkeep

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Confirmed renewals keep the grant past several TTLs and move ValidUntil.
func TestHold_RenewalsKeepIt(t *testing.T) {
	var n atomic.Int64
	ttl := 1500 * time.Millisecond // renewals every 500ms, lost only if none is confirmed for 1.35s
	h := Start(time.Now(), ttl, "test", func(context.Context) error { n.Add(1); return nil })
	defer h.End(errors.New("test over"))
	first := h.ValidUntil()
	select {
	case <-h.Done():
		t.Fatalf("ended while renewals were confirmed: %v", h.Err())
	case <-time.After(4 * ttl):
	}
	if n.Load() < 3 || !h.ValidUntil().After(first) {
		t.Fatalf("%d renewals, ValidUntil %v (first %v); want at least 3 and later", n.Load(), h.ValidUntil(), first)
	}
}

// A renewal stuck on the network does not keep the grant: Jeopardy
// closes, then Done at ValidUntil, with ErrLockLost.
func TestHold_StuckRenewalEndsAtValidUntil(t *testing.T) {
	ttl := 3 * time.Second // jeopardy at 2s, the end at 2.7s: 700ms apart
	sent := time.Now()
	h := Start(sent, ttl, "test", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	until := h.ValidUntil()
	if want := sent.Add(ttl - fence.DefaultMargin(ttl)); !until.Equal(want) {
		t.Fatalf("ValidUntil = %v; want sent + ttl - margin = %v", until, want)
	}
	<-h.Jeopardy()
	select {
	case <-h.Done():
		t.Fatal("Done closed with Jeopardy; want jeopardy first")
	default:
	}
	<-h.Done()
	if late := time.Since(until); late < 0 || late > 2*time.Second {
		t.Fatalf("Done closed %v after ValidUntil", late)
	}
	if !errors.Is(h.Err(), fence.ErrLockLost) || !errors.Is(context.Cause(h.Context()), fence.ErrLockLost) {
		t.Fatalf("Err = %v, cause %v; want fence.ErrLockLost", h.Err(), context.Cause(h.Context()))
	}
	if h.Remaining() != 0 {
		t.Fatalf("Remaining = %v after the end", h.Remaining())
	}
}

// A store that says the grant is gone ends it at once with that error.
func TestHold_StoreSaysLost(t *testing.T) {
	gone := errors.New("row taken")
	h := Start(time.Now(), time.Second, "test", func(context.Context) error { return errors.Join(fence.ErrLockLost, gone) })
	if err := h.Renew(context.Background()); !errors.Is(err, gone) {
		t.Fatalf("Renew = %v; want the store's error", err)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done open after the store said lost")
	}
	if !errors.Is(h.Err(), gone) {
		t.Fatalf("Err = %v", h.Err())
	}
}

// A confirmation that arrives after ValidUntil is not taken: the grant is
// lost, not extended.
func TestHold_LateConfirmationNotTaken(t *testing.T) {
	ttl := 300 * time.Millisecond
	release := make(chan struct{})
	h := Start(time.Now(), ttl, "test", func(ctx context.Context) error { <-release; return nil })
	go func() { time.Sleep(ttl); close(release) }()
	err := h.Renew(context.Background())
	if !errors.Is(err, fence.ErrLockLost) {
		t.Fatalf("Renew confirmed after ValidUntil = %v; want fence.ErrLockLost", err)
	}
	<-h.Done()
	<-h.Stopped()
}
