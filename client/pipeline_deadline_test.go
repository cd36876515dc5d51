package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// A pipelined call on a link that went silent ends at its attempt's
// deadline (the stream's one timer for all its calls' deadlines), is
// retried, and succeeds once the link is back, long before the caller's
// context ends: were the deadline not kept, the call would wait for an
// answer that never comes until the caller gave up.
func TestPipeline_AttemptDeadlineOnSilentLink(t *testing.T) {
	srv := testserver.Start(t)
	link, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	var (
		mu       sync.Mutex
		timedOut int
	)
	hooks := client.Hooks{Retry: func(op, _ string, _ int, err error) {
		if op == "try lock" && connect.CodeOf(err) == connect.CodeDeadlineExceeded {
			mu.Lock()
			timedOut++
			mu.Unlock()
		}
	}}
	c := newClient(t, []string{link.Addr()}, client.WithRequestTimeout(300*time.Millisecond), client.WithHooks(hooks))
	s := newSession(t, c, client.WithTTL(time.Minute))
	m := client.NewMutex(s, "silent-link")
	ctx := testCtx(t)
	// The pipeline's stream is open and its first answers came.
	if err := m.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	link.SetMode(faultproxy.Blackhole)
	lctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	result := make(chan error, 1)
	start := time.Now()
	go func() { result <- m.TryLock(lctx) }()
	eventually(t, "a try lock attempt timed out on the silent link", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return timedOut > 0
	})
	link.SetMode(faultproxy.Pass)
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("TryLock after the link came back: %v", err)
		}
	case <-time.After(bound):
		t.Fatalf("TryLock still waiting %v after the link came back (%v since it started)", bound, time.Since(start))
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
