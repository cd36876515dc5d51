package client_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/proctest"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// hookLog records the hooks' calls.
type hookLog struct {
	mu      sync.Mutex
	events  []string
	lostErr error
	retries []string
	late    []fence.Token
}

func (h *hookLog) add(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *hookLog) hooks() client.Hooks {
	return client.Hooks{
		Jeopardy:  func(uint64, time.Duration) { h.add("jeopardy") },
		Recovered: func(uint64) { h.add("recovered") },
		Lost: func(_ uint64, err error) {
			h.mu.Lock()
			h.lostErr = err
			h.mu.Unlock()
			h.add("lost")
		},
		Retry: func(op, endpoint string, _ int, _ error) {
			h.mu.Lock()
			h.retries = append(h.retries, op+"@"+endpoint)
			h.mu.Unlock()
		},
		LateGrant: func(_ string, _ uint64, tok fence.Token) {
			h.mu.Lock()
			h.late = append(h.late, tok)
			h.mu.Unlock()
			h.add("late")
		},
	}
}

func (h *hookLog) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

// A holder cut off from the server: the hooks see jeopardy, then the
// loss, each once, in that order, with the session's own error.
func TestHooks_JeopardyThenLost(t *testing.T) {
	_, p := proxiedServer(t)
	var h hookLog
	c := newClient(t, []string{p.Addr()}, client.WithRequestTimeout(time.Second), client.WithHooks(h.hooks()))
	s := newSession(t, c, client.WithTTL(3*time.Second))
	vu := s.ValidUntil()
	eventually(t, "renewal", func() bool { return s.ValidUntil().After(vu) })
	p.SetMode(faultproxy.Blackhole)
	defer p.SetMode(faultproxy.Pass)
	within(t, "Done", s.Done())
	eventually(t, "lost hook", func() bool { return len(h.seen()) >= 2 })
	if got := h.seen(); len(got) != 2 || got[0] != "jeopardy" || got[1] != "lost" {
		t.Fatalf("hooks saw %v, want [jeopardy lost]", got)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !errors.Is(h.lostErr, fence.ErrLockLost) || h.lostErr.Error() != s.Err().Error() {
		t.Fatalf("Lost hook got %v, Session.Err is %v", h.lostErr, s.Err())
	}
}

// Closing a session is no loss: the Lost hook stays silent.
func TestHooks_CloseIsNotLost(t *testing.T) {
	srv := testserver.Start(t)
	var h hookLog
	c := newClient(t, []string{srv.Addr()}, client.WithHooks(h.hooks()))
	s := newSession(t, c)
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := h.seen(); len(got) != 0 {
		t.Fatalf("hooks saw %v after Close", got)
	}
}

// The first endpoint is down (nothing listens): the call retries on the
// next and the Retry hook names the failed endpoint.
func TestHooks_Retry(t *testing.T) {
	srv := testserver.Start(t)
	dead := proctest.FreeAddr(t)
	var h hookLog
	c := newClient(t, []string{dead, srv.Addr()}, client.WithHooks(h.hooks()))
	newSession(t, c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.retries) == 0 || h.retries[0] != "create session@"+dead {
		t.Fatalf("retries %v, want the first to be create session@%s", h.retries, dead)
	}
}
