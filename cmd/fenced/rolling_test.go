package main_test

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// A rolling restart of a real 3-node cluster under load: each member in
// turn gets SIGTERM, exits 0 and starts again on its data dir, back and
// serving before the next. No acknowledged grant is lost: every load
// worker's tokens keep rising across all three restarts (a token repeated
// or lower after a restart fails the test), the grants keep coming, and
// every long holder either still holds its lock (the cluster refuses the
// lock to another session and the holder's context is alive) or was told
// it lost it (its context is cancelled).
func TestCluster_RollingRestartLosesNoGrant(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	var eps []string
	for _, s := range servers {
		eps = append(eps, s.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	holders := quietClient(t, eps...)
	type held struct {
		m     *client.Mutex
		token fence.Token
	}
	var locks []held
	for i := 0; i < 3; i++ {
		s, err := holders.NewSession(ctx, client.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m := client.NewMutex(s, "held-"+strconv.Itoa(i))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		locks = append(locks, held{m, m.Token()})
	}

	load := startGrantLoad(t, quietClient(t, eps...), 3)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	load.waitGrants(t, 10)
	for _, s := range servers {
		if err := s.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if !s.Wait(20 * time.Second) {
			t.Fatalf("%s did not exit 20s after SIGTERM\n%s", s.NodeID, s.Log())
		}
		if code := s.ExitCode(); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM\n%s", s.NodeID, code, s.Log())
		}
		s.Start()
		load.waitGrants(t, 10)
	}
	load.halt()
	if n := load.backwards.Load(); n != 0 {
		t.Fatalf("%d grants had a token not above the same worker's previous one", n)
	}

	other := quietClient(t, eps...)
	rival, err := other.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range locks {
		select {
		case <-h.m.Context().Done():
			t.Logf("%s: the holder was told it lost the lock (%v)", h.m.Name(), context.Cause(h.m.Context()))
			continue
		default:
		}
		err := client.NewMutex(rival, h.m.Name()).TryLock(ctx)
		if !errors.Is(err, fence.ErrNotGranted) {
			select {
			case <-h.m.Context().Done(): // lost meanwhile, and told
				continue
			default:
			}
			t.Fatalf("%s: its holder (token %d) believes it holds it, but TryLock by another session: %v", h.m.Name(), h.token, err)
		}
		if h.m.Token() != h.token {
			t.Fatalf("%s: token changed from %d to %d", h.m.Name(), h.token, h.m.Token())
		}
	}
}
