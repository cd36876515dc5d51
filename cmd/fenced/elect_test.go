package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/faultproxy"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// The stale leader, end to end with real processes: a `fenced elect`
// leader and its writing CMD are SIGSTOPped past the session's TTL; the
// next candidate is elected with a higher term token and writes; the old
// leader is SIGCONTed: `fenced elect` sees the leadership lost, stops CMD
// and exits 4, and every write CMD makes with its old term token is
// rejected by the resource's guard, which names the successor's token.
func TestElect_PausedLeaderFencedOut(t *testing.T) {
	srv := proctest.StartServer(t)
	res := &resource{}
	web := httptest.NewServer(res)
	defer web.Close()

	leader := startFenced(t, []string{"FENCED_TEST_WRITER=" + web.URL}, "elect", "stale", "--value", "old", "--ttl", "1s", "--endpoints", srv.Addr, "--", os.Args[0])
	eventually(t, "the leader's first accepted write", 20*time.Second, func() bool {
		for _, a := range res.snapshot() {
			if a.accepted {
				return true
			}
		}
		return false
	})
	first := res.snapshot()[0]
	signalGroup(t, leader.cmd.Process.Pid, syscall.SIGSTOP)
	signalGroup(t, first.pid, syscall.SIGSTOP)

	c := quietClient(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, client.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.NewElection(s, "stale").Campaign(ctx, "new")
	if err != nil || second <= first.token {
		t.Fatalf("successor's Campaign = %v, %v; want a term token above the paused leader's %d", second, err, first.token)
	}
	req, _ := http.NewRequest(http.MethodPut, web.URL, nil)
	req.Header.Set("X-Fencing-Token", second.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("write by the successor: %v %v", resp, err)
	}
	resp.Body.Close()
	newWrite := len(res.snapshot()) - 1

	signalGroup(t, first.pid, syscall.SIGCONT)
	signalGroup(t, leader.cmd.Process.Pid, syscall.SIGCONT)
	if code := leader.wait(t, 30*time.Second); code != 4 {
		t.Fatalf("paused leader exit code %d, want 4 (leadership lost)\nstderr: %s", code, leader.stderr.String())
	}
	if msg := leader.stderr.String(); !strings.Contains(msg, `leadership of "stale" lost (token `+first.token.String()+")") {
		t.Errorf("the leader's stderr does not name the election and token lost: %q", msg)
	}
	var rejected int
	for _, a := range res.snapshot()[newWrite+1:] {
		if a.token != first.token {
			continue
		}
		if a.accepted {
			t.Fatalf("the paused leader's write with term token %d was accepted after token %d:\n%s", a.token, second, fmtAttempts(res.snapshot()))
		}
		if a.required != second {
			t.Fatalf("stale write rejected with required token %d, want %d", a.required, second)
		}
		rejected++
	}
	if rejected == 0 {
		t.Fatalf("the resumed leader made no write; cannot show it was rejected:\n%s", fmtAttempts(res.snapshot()))
	}
	t.Logf("paused leader term token %d; successor's %d; %d stale writes rejected", first.token, second, rejected)
}

// fenced elect runs CMD only while leading: a second `fenced elect` waits
// as a candidate without running its CMD, and starts it, with a higher
// term token, once the first CMD exited (which resigned the leadership).
// When the leader's keep-alives can no longer reach the server, fenced
// elect gives the leadership up before the server can have ended it,
// stops CMD (SIGTERM to its process group) and exits 4, exactly like
// fenced lock.
func TestElect_RunsOnlyWhileLeading(t *testing.T) {
	srv := proctest.StartServer(t)
	proxy, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	dir := t.TempDir()
	gate, marker := dir+"/gate", dir+"/terminated"
	first := startFenced(t, nil, "elect", "job", "--value", "a", "--endpoints", srv.Addr, "--", "sh", "-c",
		`echo "$FENCED_TOKEN $FENCED_VALUE"; while [ ! -e "$0" ]; do sleep 0.05; done`, gate)
	eventually(t, "the first CMD started", 20*time.Second, func() bool { return strings.Contains(first.stdout.String(), " a") })
	second := startFenced(t, nil, "elect", "job", "--value", "b", "--ttl", "3s", "--grace", "10s", "--endpoints", proxy.Addr(), "--", "sh", "-c",
		`echo "$FENCED_TOKEN $FENCED_VALUE"; trap 'touch `+marker+`; exit 0' TERM; while true; do sleep 0.05; done`)
	c := quietClient(t, srv.Addr)
	eventually(t, "the second candidate queued", 20*time.Second, func() bool {
		st, err := c.ElectionLeader(context.Background(), "job")
		return err == nil && st.Candidates == 1
	})
	if out := second.stdout.String(); out != "" {
		t.Fatalf("a candidate ran its CMD while another led: %q", out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("first fenced elect exit %d, want CMD's 0; stderr %s", code, first.stderr.String())
	}
	eventually(t, "the second CMD started", 20*time.Second, func() bool { return strings.Contains(second.stdout.String(), " b") })
	t1, _ := fence.ParseToken(strings.Fields(first.stdout.String())[0])
	t2, _ := fence.ParseToken(strings.Fields(second.stdout.String())[0])
	if !t1.Valid() || t2 <= t1 {
		t.Fatalf("term tokens %v then %v, want rising", t1, t2)
	}

	proxy.SetMode(faultproxy.Blackhole)
	cut := time.Now()
	eventually(t, "CMD terminated", 20*time.Second, func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	// The client gave up first: the server still has it leading.
	if st, err := c.ElectionLeader(context.Background(), "job"); err != nil || st.Leader.Token != t2 {
		t.Errorf("when CMD was stopped the server's leader was %+v (%v); want still token %v: the client must give up first", st, err, t2)
	}
	if code := second.wait(t, 20*time.Second); code != 4 {
		t.Fatalf("exit code %d, want 4\nstderr: %s", code, second.stderr.String())
	}
	if msg := second.stderr.String(); !strings.Contains(msg, `leadership of "job" lost (token `+t2.String()+")") {
		t.Fatalf("stderr %q does not say which leadership was lost", msg)
	}
	t.Logf("CMD stopped and fenced elect exited 4 %v after the cut", time.Since(cut).Round(time.Millisecond))
}

// observeLine is one line of fenced observe --json.
type observeLine struct {
	Revision     uint64 `json:"revision,string"`
	PrevRevision uint64 `json:"prev_revision,string"`
	Leader       bool   `json:"leader"`
	Token        string `json:"token"`
	Value        string `json:"value"`
	Skipped      bool   `json:"skipped"`
}

// A `fenced observe` process sees every change of an election, in order
// and without a gap (each line's prev_revision is the revision of the
// line before, none skipped), while the follower it is connected through
// is restarted and then the cluster's leader is SIGKILLed; every proclaim
// the leader had acknowledged is among the values it printed.
func TestObserve_NoGapAcrossRestartAndFailover(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	// The observer goes through followers[0] first.
	obsEndpoints := proctest.Endpoints(append([]*proctest.Server{followers[0], followers[1]}, leader))
	obs := startFenced(t, nil, "observe", "svc", "--json", "--timeout", "30s", "--endpoints", obsEndpoints)

	c := quietClient(t, strings.Split(proctest.Endpoints(servers), ",")...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := c.NewSession(ctx, client.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e := client.NewElection(s, "svc")
	if _, err := e.Campaign(ctx, "v0"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprint("v", i)
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			err := e.Proclaim(pctx, v)
			pcancel()
			if err != nil {
				t.Errorf("Proclaim(%s): %v", v, err)
				return
			}
			mu.Lock()
			acked = append(acked, v)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	lines := func() int { return strings.Count(obs.stdout.String(), "\n") }
	eventually(t, "proclaims before the restart", 30*time.Second, func() bool { return count() >= 20 && lines() >= 10 })
	followers[0].Kill()
	before := count()
	eventually(t, "proclaims while the follower is down", 30*time.Second, func() bool { return count() >= before+20 })
	followers[0].Start()
	before = count()
	eventually(t, "proclaims after the restart", 30*time.Second, func() bool { return count() >= before+20 })
	leader.Kill()
	killed := time.Now()
	before = count()
	eventually(t, "a proclaim after the leader's SIGKILL", 60*time.Second, func() bool { return count() > before })
	t.Logf("first proclaim acknowledged %v after the SIGKILL of the cluster's leader", time.Since(killed).Round(time.Millisecond))
	eventually(t, "proclaims after the leader's SIGKILL", 60*time.Second, func() bool { return count() >= before+20 })
	close(stop)
	bounded.Wait(t, "proclaimer", time.Minute, &wg)
	mu.Lock()
	last := acked[len(acked)-1]
	all := append([]string(nil), acked...)
	mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(obs.stdout.String(), `"value":"`+last+`"`) {
		if time.Now().After(deadline) {
			out := obs.stdout.String()
			t.Fatalf("the observer did not print the last proclaim %s within 30s; its last lines:\n%s\nstderr: %s", last, out[max(0, len(out)-600):], obs.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	var seen []observeLine
	sc := bufio.NewScanner(strings.NewReader(obs.stdout.String()))
	for sc.Scan() {
		var l observeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("observe line %q: %v", sc.Text(), err)
		}
		seen = append(seen, l)
	}
	values := map[string]bool{}
	for i, l := range seen {
		if l.Skipped {
			t.Fatalf("line %d is marked skipped: %+v", i, l)
		}
		if i > 0 && (l.PrevRevision != seen[i-1].Revision || l.Revision <= seen[i-1].Revision) {
			t.Fatalf("line %d (revision %d, previous %d) does not follow line %d (revision %d): a gap\n%s", i, l.Revision, l.PrevRevision, i-1, seen[i-1].Revision, obs.stdout.String())
		}
		values[l.Value] = true
	}
	for _, v := range all {
		if !values[v] {
			t.Fatalf("acknowledged proclaim %s was never observed", v)
		}
	}
	t.Logf("%d changes observed without a gap across a follower restart and a leader SIGKILL (%d proclaims); observer stderr: %q",
		len(seen), len(all), obs.stderr.String())
}

// The failover time of an election, measured, not asserted: the leading
// `fenced elect` process is SIGKILLed; a standby `fenced elect` candidate
// is elected once the server expires the dead leader's session (its TTL
// after its last renewal) and starts its CMD with the next term token.
func TestElect_FailoverTime(t *testing.T) {
	srv := proctest.StartServer(t)
	const ttl = time.Second
	first := startFenced(t, nil, "elect", "fo", "--ttl", ttl.String(), "--endpoints", srv.Addr, "--", "sh", "-c", `echo "$FENCED_TOKEN"; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done`)
	eventually(t, "the first leader's CMD", 20*time.Second, func() bool { return strings.Contains(first.stdout.String(), "\n") })
	standby := startFenced(t, nil, "elect", "fo", "--ttl", ttl.String(), "--endpoints", srv.Addr, "--", "sh", "-c", `echo "$FENCED_TOKEN"; while kill -0 $PPID 2>/dev/null; do sleep 0.05; done`)
	c := quietClient(t, srv.Addr)
	eventually(t, "the standby queued", 20*time.Second, func() bool {
		st, err := c.ElectionLeader(context.Background(), "fo")
		return err == nil && st.Candidates == 1
	})
	signalGroup(t, first.cmd.Process.Pid, syscall.SIGKILL)
	killed := time.Now()
	eventually(t, "the standby's CMD", 30*time.Second, func() bool { return strings.Contains(standby.stdout.String(), "\n") })
	took := time.Since(killed)
	t1, _ := strconv.ParseUint(strings.TrimSpace(first.stdout.String()), 10, 64)
	t2, _ := strconv.ParseUint(strings.TrimSpace(standby.stdout.String()), 10, 64)
	if t2 <= t1 {
		t.Fatalf("standby's term token %d, not above the killed leader's %d", t2, t1)
	}
	t.Logf("election failover (SIGKILL of the leading fenced elect to the standby's CMD holding term token %d, session TTL %v): %v", t2, ttl, took.Round(time.Millisecond))
}

// Bad input to elections, against a real server with a small
// --max-election-value-bytes: a malformed name (to fenced elect, fenced
// observe and the JSON API) and a value above the limit are refused with
// a message saying what is allowed, and the server's state (last token,
// sessions, the election) is the same after as before.
func TestElect_BadInputChangesNothing(t *testing.T) {
	srv := proctest.StartServer(t, "--max-election-value-bytes", "16")
	status := func() string {
		out, errOut, code := runFenced(t, "status", "--json", "--endpoints", srv.Addr)
		if code != 0 {
			t.Fatalf("status: exit %d %s", code, errOut)
		}
		var st struct {
			LastToken string `json:"last_token"`
			Sessions  []any  `json:"sessions"`
			Locks     []any  `json:"locks"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json %q: %v", out, err)
		}
		c := quietClient(t, srv.Addr)
		_, err := c.ElectionLeader(context.Background(), "big")
		return fmt.Sprintf("token %s, %d sessions, %d locks, election big: %v", st.LastToken, len(st.Sessions), len(st.Locks), err)
	}
	before := status()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"elect", "orders\u202egpj", "--", "true"}, 2, "U+202E"},
		{[]string{"elect", "", "--", "true"}, 2, "empty"},
		{[]string{"observe", "a\x01b"}, 2, "control"},
		{[]string{"elect", "big", "--value", "seventeen bytes!!", "--", "true"}, 2, "larger than 16 (--max-election-value-bytes)"},
	} {
		args := append([]string{tt.args[0], "--endpoints", srv.Addr}, tt.args[1:]...)
		_, errOut, code := runFenced(t, args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("fenced %q: exit %d %q, want exit %d mentioning %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
	resp, err := http.Post("http://"+srv.Addr+"/fenced.v1.ElectionService/Leader", "application/json", strings.NewReader(`{"name":"ord\u200bers"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "U+200B") {
		t.Errorf("Leader of a name with U+200B over JSON: %d %s, want 400", resp.StatusCode, body)
	}
	eventually(t, "the state as before", 10*time.Second, func() bool { return status() == before })
	if _, errOut, code := runFenced(t, "serve", "--max-election-value-bytes", "70000", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"); code != 2 || !strings.Contains(errOut, "max-election-value-bytes") {
		t.Errorf("serve --max-election-value-bytes 70000: exit %d %q, want a usage error", code, errOut)
	}
}
