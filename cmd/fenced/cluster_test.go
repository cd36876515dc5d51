package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/proctest"
)

type clusterStatus struct {
	Leader  string
	Members []struct {
		ID      string `json:"id"`
		Role    string `json:"role"`
		APIAddr string `json:"api_addr"`
	}
}

func statusOf(t *testing.T, endpoints string) clusterStatus {
	t.Helper()
	out, errOut, code := runFenced(t, "cluster", "status", "--json", "--endpoints", endpoints)
	var st clusterStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("cluster status: exit %d %q %s", code, out, errOut)
	}
	return st
}

func leaderOf(t *testing.T, servers []*proctest.Server) (leader *proctest.Server, followers []*proctest.Server) {
	t.Helper()
	return leaderOfEnv(t, nil, servers)
}

// A follower forwards writes and reads to the leader; cluster status
// reports every member with one leader.
func TestCluster_FollowerForwards(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	st := statusOf(t, followers[0].Addr)
	if len(st.Members) != 3 || st.Leader != leader.NodeID {
		t.Fatalf("status from a follower: %+v, want 3 members led by %s", st, leader.NodeID)
	}
	roles := map[string]int{}
	for _, m := range st.Members {
		roles[m.Role]++
	}
	if roles["leader"] != 1 || roles["follower"] != 2 {
		t.Fatalf("roles %v, want one leader and two followers", roles)
	}
	out, errOut, code := runFenced(t, "lock", "fwd", "--endpoints", followers[1].Addr, "--", "sh", "-c",
		`"$0" kv put fwd v --endpoints "$1" >/dev/null && "$0" kv get fwd --endpoints "$1"`, proctest.Binary(t), followers[0].Addr)
	if code != 0 || out != "v" {
		t.Fatalf("lock and kv through followers: exit %d %q %s", code, out, errOut)
	}
}

// recordedGrant is a grant a client was told about.
type recordedGrant struct {
	name    string
	token   fence.Token
	invoked time.Time // when the Lock call started
	at      time.Time // when it returned the grant
}

// SIGKILL the leader of a 3-node cluster while clients acquire and release:
// the remaining two elect a leader, clients resume on it, every token any
// client saw is unique and per name increasing in grant order, and every
// token after the failover is above every token before it.
func TestCluster_KillLeaderUnderLoad(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	c, err := client.New(strings.Split(proctest.Endpoints(servers), ","), client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	var grants []recordedGrant
	var killedAt time.Time
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("job-%d", w%3)
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := c.NewSession(ctx, client.WithTTL(5*time.Second))
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				m := client.NewMutex(s, name)
				for i := 0; i < 20; i++ {
					lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
					invoked := time.Now()
					err := m.Lock(lctx)
					lcancel()
					if err != nil {
						if s.Err() != nil {
							break
						}
						continue
					}
					mu.Lock()
					grants = append(grants, recordedGrant{name, m.Token(), invoked, time.Now()})
					mu.Unlock()
					uctx, ucancel := context.WithTimeout(ctx, 3*time.Second)
					m.Unlock(uctx)
					ucancel()
				}
				cctx, ccancel := context.WithTimeout(ctx, time.Second)
				s.Close(cctx)
				ccancel()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(grants) }
	eventually(t, "grants before the kill", 30*time.Second, func() bool { return count() >= 100 })
	mu.Lock()
	killedAt = time.Now()
	before := len(grants)
	mu.Unlock()
	leader.Kill()
	failover := firstAcquire(t, followers, killedAt)
	eventually(t, "grants after the kill", 60*time.Second, func() bool { return count() >= before+100 })
	close(stop)
	bounded.Wait(t, "workers", time.Minute, &wg)

	mu.Lock()
	defer mu.Unlock()
	var maxBefore fence.Token
	last := map[string]fence.Token{}
	seen := map[fence.Token]string{}
	for _, g := range grants {
		if prev, ok := seen[g.token]; ok {
			t.Fatalf("token %d granted twice (%s and %s)", g.token, prev, g.name)
		}
		seen[g.token] = g.name
		if g.token <= last[g.name] {
			t.Fatalf("%s: token %d after token %d in grant order", g.name, g.token, last[g.name])
		}
		last[g.name] = g.token
		if g.at.Before(killedAt) {
			maxBefore = max(maxBefore, g.token)
		}
	}
	// A grant asked for after the kill is above every grant acknowledged
	// before it. (A grant acknowledged after the kill may have been issued
	// before it: calls in flight at the kill.)
	for _, g := range grants {
		if g.invoked.After(killedAt) && g.token <= maxBefore {
			t.Fatalf("token %d, asked for after the kill, is not above %d, acknowledged before it", g.token, maxBefore)
		}
	}
	st := statusOf(t, proctest.Endpoints(followers))
	if st.Leader == "" || st.Leader == leader.NodeID {
		t.Fatalf("leader after the kill: %q, want one of the survivors", st.Leader)
	}
	t.Logf("%d grants; leader %s killed; new leader %s; failover (SIGKILL to the first acquire on the new leader) %v",
		len(grants), leader.NodeID, st.Leader, failover.Round(time.Millisecond))
}

// firstAcquire tries one-shot acquires of a fresh name against the
// survivors until one succeeds and returns the time since since.
func firstAcquire(t *testing.T, survivors []*proctest.Server, since time.Time) time.Duration {
	t.Helper()
	c, err := client.New(strings.Split(proctest.Endpoints(survivors), ","), client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	name := fmt.Sprintf("failover-probe-%d", since.UnixNano())
	for time.Since(since) < 30*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		l, err := c.Acquire(ctx, name, 10*time.Second)
		cancel()
		if err == nil {
			d := time.Since(since)
			l.Release(context.Background())
			return d
		}
	}
	t.Fatal("no acquire succeeded within 30s of killing the leader")
	return 0
}
