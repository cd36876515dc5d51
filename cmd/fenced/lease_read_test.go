package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// A leader with --lease-reads SIGSTOPped past its lease while the others
// elect a new leader that grants a lock: resumed, the old leader must not
// answer a read of that lock from its old state (the lock free). It fails
// the reads or forwards them; reads sent while it was stopped and reads
// sent right after it resumed are both tried, in three rounds (each pauses
// the leader of the moment). The negative control
// (--test-unchecked-lease-reads: reads served whenever the node believes it
// leads) shows that the test sees stale reads when the lease is not
// checked; the window is short (until the resumed node's raft notices the
// new term, which the ack tracker and the read's term check made
// shorter), so it gets up to 24 rounds to show one; it ends at the first.
func TestCluster_LeaseReadAfterPausedLeader(t *testing.T) {
	t.Run("lease", func(t *testing.T) {
		servers := proctest.StartCluster(t, 3, "--lease-reads")
		for round := range 3 {
			stale, fresh := pausedLeaderReads(t, servers, round)
			if len(stale) > 0 {
				t.Fatalf("round %d: the resumed old leader served %d stale reads: %s", round, len(stale), strings.Join(stale, "; "))
			}
			t.Logf("round %d: %d reads at the resumed old leader answered the new state, none stale", round, fresh)
		}
	})
	t.Run("unchecked-negative-control", func(t *testing.T) {
		servers := proctest.StartCluster(t, 3, "--lease-reads")
		for _, s := range servers {
			s.Kill()
			s.Faults = true
			s.Args = append(s.Args, "--test-unchecked-lease-reads")
			s.StartNoWait()
		}
		for _, s := range servers {
			s.WaitReady()
		}
		for round := range 24 {
			if stale, _ := pausedLeaderReads(t, servers, round); len(stale) > 0 {
				t.Logf("negative control: round %d: %d stale reads, e.g. %s", round, len(stale), stale[0])
				return
			}
		}
		t.Fatal("negative control: with the lease unchecked no stale read was seen in 24 rounds, so the test cannot catch one")
	})
}

// pausedLeaderReads runs one round of the scenario against the leader of
// the moment and returns the stale answers and the number of answers that
// showed the new grant.
func pausedLeaderReads(t *testing.T, servers []*proctest.Server, round int) (stale []string, fresh int) {
	t.Helper()
	old, followers := leaderOf(t, servers)
	name := fmt.Sprintf("lease-read-%d", round)
	// The leader serves reads on its lease.
	before := metricValue(t, old.Addr, "fenced_lease_reads_total")
	eventually(t, "a read served on the lease", 20*time.Second, func() bool {
		describeLock(old.Addr, name)
		return metricValue(t, old.Addr, "fenced_lease_reads_total") > before
	})

	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			old.Signal(syscall.SIGCONT)
		}
	}()
	others := proctest.Endpoints(followers)
	eventually(t, "a new leader", 30*time.Second, func() bool {
		out, _, code := runFenced(t, "cluster", "status", "--json", "--endpoints", others)
		var st raftStatus
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Leader != "" && st.Leader != old.NodeID
	})
	out, errOut, code := runFenced(t, "acquire", name, "--ttl", "1m", "--json", "--endpoints", others)
	if code != 0 {
		t.Fatalf("acquire at the new leader: exit %d %q %s", code, out, errOut)
	}
	var g struct{ Token string }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("acquire: %v in %q", err, out)
	}
	token, err := strconv.ParseUint(g.Token, 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	judge := func(when string, status int, body string) {
		mu.Lock()
		defer mu.Unlock()
		if status != http.StatusOK {
			return
		}
		if holderToken(body) == token {
			fresh++
			return
		}
		stale = append(stale, fmt.Sprintf("%s: 200 %s (the lock is held with token %d)", when, body, token))
	}
	// Reads sent to the stopped process wait in its socket buffers.
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := describeLock(old.Addr, name)
			judge("sent while stopped", status, body)
		}()
	}
	time.Sleep(200 * time.Millisecond) // let them reach the socket; not needed for the verdict
	if err := old.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		status, body := describeLock(old.Addr, name)
		judge("sent after resuming", status, body)
	}
	wg.Wait()
	return stale, fresh
}

// describeLock calls Describe on addr alone (no retry, no other endpoint)
// and returns the HTTP status and body; status 0 when the call failed.
func describeLock(addr, name string) (int, string) {
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Post("http://"+addr+"/fenced.v1.LockService/Describe", "application/json", strings.NewReader(`{"name":"`+name+`"}`))
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// holderToken returns the token of the holder in a Describe response, 0
// when the lock is free.
func holderToken(body string) uint64 {
	var r struct {
		Lock struct {
			Holder struct {
				Token string `json:"token"`
			} `json:"holder"`
		} `json:"lock"`
	}
	if json.Unmarshal([]byte(body), &r) != nil {
		return 0
	}
	tok, _ := strconv.ParseUint(r.Lock.Holder.Token, 10, 64)
	return tok
}

// metricValue returns the value of an unlabelled metric on addr's
// /metrics, 0 when absent.
func metricValue(t *testing.T, addr, metric string) float64 {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
