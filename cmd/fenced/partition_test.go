package main_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func quietClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	c, err := client.New(endpoints, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acquireOnce makes one one-shot acquire straight to one member's API,
// without retries or failover.
func acquireOnce(addr, name string, timeout time.Duration) (*fencedv1.AcquireResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lc := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+addr)
	resp, err := lc.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, TtlMs: 30000}))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func indexOf(servers []*proctest.Server, s *proctest.Server) int {
	for i, x := range servers {
		if x == s {
			return i
		}
	}
	return -1
}

// A leader cut off from both followers grants nothing once cut off; the
// majority elects a leader and goes on; after healing, the old leader
// rejoins and tokens continue above every earlier one.
func TestCluster_PartitionedLeaderGrantsNothing(t *testing.T) {
	servers, links := proctest.StartClusterWithLinks(t, 3)
	leader, followers := leaderOf(t, servers)
	before, err := acquireOnce(leader.Addr, "before", 5*time.Second)
	if err != nil || !before.Granted {
		t.Fatalf("acquire before the partition: %v %v", before, err)
	}

	links.Isolate(indexOf(servers, leader))
	cutAt := time.Now()
	// Every acquire sent to the isolated leader fails: it cannot commit.
	for time.Since(cutAt) < 3*time.Second {
		resp, err := acquireOnce(leader.Addr, "minority", time.Second)
		if err == nil && resp.Granted {
			t.Fatalf("the isolated leader confirmed a grant (token %d) %v after the cut", resp.Grant.Token, time.Since(cutAt))
		}
	}
	majority := quietClient(t, followers[0].Addr, followers[1].Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := majority.Acquire(ctx, "majority", 10*time.Second)
	if err != nil {
		t.Fatalf("the majority did not go on: %v", err)
	}
	if l.Token() <= fence.Token(before.Grant.Token) {
		t.Fatalf("majority token %d, want above %d", l.Token(), before.Grant.Token)
	}

	links.Heal()
	var after *fencedv1.AcquireResponse
	eventually(t, "acquire through the healed old leader", 30*time.Second, func() bool {
		after, err = acquireOnce(leader.Addr, "after", time.Second)
		return err == nil && after.Granted
	})
	if fence.Token(after.Grant.Token) <= l.Token() {
		t.Fatalf("token after healing %d, want above %d", after.Grant.Token, l.Token())
	}
	st := statusOf(t, proctest.Endpoints(servers))
	if st.Leader == "" {
		t.Fatal("no leader after healing")
	}
}

// A leader SIGSTOPped past the election timeout steps down when it is
// SIGCONTed and never confirms a stale grant: the lock taken on the new
// leader meanwhile is not granted again through it.
func TestCluster_PausedLeaderNeverConfirmsStaleGrant(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	leader.Signal(syscall.SIGSTOP)
	defer leader.Signal(syscall.SIGCONT)

	majority := quietClient(t, followers[0].Addr, followers[1].Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := majority.Acquire(ctx, "x", 30*time.Second)
	if err != nil {
		t.Fatalf("acquire on the new leader: %v", err)
	}
	// A request reaches the paused leader's socket now and is served when
	// it wakes up, while it may still believe it leads.
	result := make(chan error, 1)
	go func() {
		resp, err := acquireOnce(leader.Addr, "x", 20*time.Second)
		if err == nil && resp.Granted {
			result <- errGranted(resp.Grant.Token)
			return
		}
		result <- nil
	}()
	time.Sleep(200 * time.Millisecond)
	leader.Signal(syscall.SIGCONT)
	if err := bounded.Recv(t, "acquire through the old leader", time.Minute, result); err != nil {
		t.Fatalf("the resumed old leader confirmed %v while session %d holds x with token %d", err, held.Grant().Session, held.Token())
	}
	eventually(t, "one leader, the old one a follower", 20*time.Second, func() bool {
		st := statusOf(t, proctest.Endpoints(servers))
		leaders := 0
		for _, m := range st.Members {
			if m.Role == "leader" {
				leaders++
			}
		}
		return leaders == 1 && st.Leader != ""
	})
}

type errGranted uint64

func (e errGranted) Error() string {
	return "a grant with token " + strings.TrimSpace(fence.Token(e).String())
}

// A session survives a leader failover when the new leader is elected
// within its TTL: its lock stays held and its keep-alives continue.
func TestCluster_SessionSurvivesFailover(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	c := quietClient(t, strings.Split(proctest.Endpoints(servers), ",")...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, client.WithTTL(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(s, "survivor")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	time.Sleep(8 * time.Second) // longer than the TTL: only renewals on the new leader keep it
	select {
	case <-s.Done():
		t.Fatalf("session lost across the failover: %v", s.Err())
	default:
	}
	other := quietClient(t, followers[0].Addr, followers[1].Addr)
	ok, g, err := other.Verify(ctx, "survivor", m.Token())
	if err != nil || !ok || g.Session != s.ID() {
		t.Fatalf("Verify after failover: %v %+v %v, want the session's grant current", ok, g, err)
	}
}
