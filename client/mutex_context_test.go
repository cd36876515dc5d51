package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// A Mutex makes its grant's context when first asked for; one first asked
// for after the session was lost is already cancelled, with the session's
// error as its cause, exactly as one made at the grant would have been:
// the holder can never get a live context for a grant it can no longer
// trust. One asked for while the session is fine is live, the same for
// every call, and cancelled by Unlock.
func TestMutex_ContextAskedAfterSessionLost(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)

	s := newSession(t, c)
	m := client.NewMutex(s, "late-context")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	gctx := m.Context()
	if gctx.Err() != nil || m.Context() != gctx {
		t.Fatalf("Context of a held grant: err %v, same on a second call %v", gctx.Err(), m.Context() == gctx)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(gctx), client.ErrNotHeld) {
		t.Fatalf("Context after Unlock: cause %v, want ErrNotHeld", context.Cause(gctx))
	}

	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The session ends before anything asked for the grant's context.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	late := m.Context()
	if late.Err() == nil {
		t.Fatal("Context first asked for after the session was lost is live")
	}
	if cause := context.Cause(late); !errors.Is(cause, client.ErrSessionClosed) {
		t.Fatalf("its cause %v, want the session's error (ErrSessionClosed)", cause)
	}
	if err := m.TryLock(ctx); err == nil {
		t.Fatal("TryLock on a closed session succeeded")
	}
}
