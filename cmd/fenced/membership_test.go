package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// Grow a 3-node cluster to 5 and shrink it back to 3 under load; the new
// members catch up from a snapshot (the log is compacted every few
// entries); the token order holds throughout.
func TestCluster_GrowAndShrinkUnderLoad(t *testing.T) {
	compact := []string{"--snapshot-threshold", "32", "--snapshot-interval", "100ms", "--trailing-logs", "8", "--wal-segment-size", "16384"}
	servers := proctest.StartCluster(t, 3, compact...)
	leaderOf(t, servers)
	c := quietClient(t, strings.Split(proctest.Endpoints(servers), ",")...)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// Load: one-shot grants of a few names, tokens checked for order.
	var mu sync.Mutex
	last := map[string]uint64{}
	var grants atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("m-%d", w)
			for {
				select {
				case <-stop:
					return
				default:
				}
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				l, err := c.Acquire(actx, name, 5*time.Second)
				acancel()
				if err != nil {
					continue
				}
				mu.Lock()
				if uint64(l.Token()) <= last[name] {
					t.Errorf("%s: token %d after %d", name, l.Token(), last[name])
				}
				last[name] = uint64(l.Token())
				mu.Unlock()
				grants.Add(1)
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				l.Release(rctx)
				rcancel()
			}
		}()
	}
	defer func() { close(stop); bounded.Wait(t, "workers", time.Minute, &wg) }()
	eventually(t, "load before growing", 30*time.Second, func() bool { return grants.Load() > 100 })

	// raft-wal drops whole segments: wait until every member has dropped
	// the one holding the first entries, so a new member cannot be sent
	// the whole log and must take a snapshot.
	eventually(t, "the log compacted on every member", 60*time.Second, func() bool {
		for _, s := range servers {
			first, _ := filepath.Glob(filepath.Join(s.DataDir, "raft", "wal", "00000000000000000001-*.wal"))
			if !strings.Contains(s.Log(), "compacting logs") || len(first) > 0 {
				return false
			}
		}
		return true
	})
	ep := "--endpoints=" + proctest.Endpoints(servers)
	var added []*proctest.Server
	for i := 4; i <= 5; i++ {
		s := &proctest.Server{NodeID: fmt.Sprintf("n%d", i), Addr: proctest.FreeAddr(t), PeerAddr: proctest.FreeAddr(t), DataDir: t.TempDir(),
			Args: append(append([]string{"--join"}, proctest.ClusterTiming...), compact...)}
		s.Init(t)
		s.StartNoWait()
		t.Cleanup(s.Kill)
		if out, errOut, code := runFenced(t, "cluster", "add", s.NodeID, s.PeerAddr, ep); code != 0 {
			t.Fatalf("cluster add %s: exit %d %s %s", s.NodeID, code, out, errOut)
		}
		added = append(added, s)
	}
	all := append(append([]*proctest.Server{}, servers...), added...)
	eventually(t, "5 members, all caught up", 60*time.Second, func() bool {
		st := statusOf(t, proctest.Endpoints(all))
		if len(st.Members) != 5 {
			return false
		}
		for _, m := range st.Members {
			if m.Role != "leader" && m.Role != "follower" {
				return false
			}
		}
		return true
	})
	for _, s := range added {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(s.Log(), "Installed remote snapshot") {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not catch up from a snapshot within 30s; its log:\n%s", s.NodeID, s.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	before := grants.Load()
	eventually(t, "load on 5 nodes", 30*time.Second, func() bool { return grants.Load() > before+50 })

	for _, s := range added {
		if out, errOut, code := runFenced(t, "cluster", "remove", s.NodeID, ep); code != 0 {
			t.Fatalf("cluster remove %s: exit %d %s %s", s.NodeID, code, out, errOut)
		}
	}
	eventually(t, "3 members", 30*time.Second, func() bool { return len(statusOf(t, proctest.Endpoints(servers)).Members) == 3 })
	before = grants.Load()
	eventually(t, "load on 3 nodes again", 30*time.Second, func() bool { return grants.Load() > before+50 })
}

// Membership changes with bad input fail with a clear message and change
// nothing.
func TestCluster_MembershipBadInput(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leaderOf(t, servers)
	ep := "--endpoints=" + proctest.Endpoints(servers)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "add", "n2", "127.0.0.1:1"}, `node id "n2" is already a member`},
		{[]string{"cluster", "add", "n9", servers[0].PeerAddr}, "is already used by member"},
		{[]string{"cluster", "remove", "n9"}, `"n9" is not a member`},
		{[]string{"cluster", "transfer-leader", "n9"}, `"n9" is not a member`},
	} {
		_, errOut, code := runFenced(t, append(tt.args, ep)...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("fenced %v: exit %d %q, want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if n := len(statusOf(t, proctest.Endpoints(servers)).Members); n != 3 {
		t.Fatalf("members after refused changes: %d, want 3", n)
	}
	// Transfer leadership to a named member.
	target := servers[2].NodeID
	if st := statusOf(t, proctest.Endpoints(servers)); st.Leader == target {
		target = servers[1].NodeID
	}
	if out, errOut, code := runFenced(t, "cluster", "transfer-leader", target, ep); code != 0 || !strings.Contains(out, "leader is "+target) {
		t.Fatalf("transfer-leader %s: exit %d %q %s", target, code, out, errOut)
	}
}

// The last voter cannot be removed.
func TestCluster_RemoveLastVoterRefused(t *testing.T) {
	srv := proctest.StartServer(t)
	_, errOut, code := runFenced(t, "cluster", "remove", "n1", "--endpoints", srv.Addr)
	if code != 2 || !strings.Contains(errOut, "last voter") {
		t.Fatalf("remove the last voter: exit %d %q", code, errOut)
	}
}

// Bootstrapping a cluster over a data dir in use fails clearly.
func TestServe_DataDirInUse(t *testing.T) {
	srv := proctest.StartServer(t)
	_, errOut, code := runFenced(t, "serve", "--data-dir", srv.DataDir, "--listen", proctest.FreeAddr(t), "--peer-listen", proctest.FreeAddr(t))
	if code == 0 || !strings.Contains(errOut, "in use by another fenced process") {
		t.Fatalf("second serve on the same data dir: exit %d %q", code, errOut)
	}
}
