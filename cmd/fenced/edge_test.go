package main_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// A bad endpoint is refused before anything is dialed: exit 2, at once,
// naming the endpoint.
func TestEdge_EndpointValidatedBeforeDial(t *testing.T) {
	proctest.Binary(t) // built before the clock starts
	for _, ep := range []string{"127.0.0.1", "127.0.0.1:", ":7700", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:http", "a b:7700"} {
		start := time.Now()
		_, errOut, code := runFenced(t, "status", "--endpoints", ep)
		if code != 2 || !strings.Contains(errOut, ep) || !strings.Contains(errOut, "host:port") {
			t.Errorf("--endpoints %q: exit %d, stderr %q; want exit 2 naming the endpoint and host:port", ep, code, errOut)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("--endpoints %q took %v to refuse", ep, d)
		}
	}
}

// A refused connection is retried while --timeout allows, and the error
// names what was tried. (Not on a terminal, there is no notice:
// TestReach_NoticeOnce.)
func TestEdge_RefusedConnectionReported(t *testing.T) {
	dead := proctest.FreeAddr(t) // nothing listens there
	start := time.Now()
	_, errOut, code := runFenced(t, "acquire", "x", "--endpoints", dead, "--timeout", "2500ms")
	took := time.Since(start)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut)
	}
	if took < 2*time.Second || took > 15*time.Second {
		t.Errorf("took %v, want about --timeout (2.5s)", took)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 {
		t.Fatalf("stderr %q: want one line, the error", errOut)
	}
	last := lines[0]
	for _, want := range []string{dead, "connection refused", "2.5s"} {
		if !strings.Contains(last, want) {
			t.Errorf("error %q does not say %q", last, want)
		}
	}
	if strings.Contains(errOut, "envelope") || strings.Contains(errOut, "EOF") {
		t.Errorf("stderr %q reports a symptom, not the refused connection", errOut)
	}
}

// A host that does not resolve is reported at once, not retried for the
// whole --timeout.
func TestEdge_UnknownHostReportedAtOnce(t *testing.T) {
	start := time.Now()
	_, errOut, code := runFenced(t, "status", "--endpoints", "no-such-host.invalid:7700", "--timeout", "20s")
	if code != 1 || !strings.Contains(errOut, "no-such-host.invalid") || !strings.Contains(errOut, "no such host") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming the host and no such host", code, errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: an unknown host was retried", d)
	}
}

// Every usage error exits 2: a missing required flag, an unknown
// subcommand, a bad flag value.
func TestEdge_UsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"auth", "token", "--role", "=read"},
		{"cluster", "frobnicate"},
		{"acquire", "x", "--ttl", "soon"},
		{"status", "--timeout", "0s"},
	} {
		_, errOut, code := runFenced(t, args...)
		if code != 2 {
			t.Errorf("fenced %v: exit %d, want 2; stderr %q", args, code, errOut)
		}
	}
}

// transfer-leader on a one-member cluster says why it cannot and what to
// do, not "internal: cannot find peer".
func TestEdge_TransferLeaderOnOneNode(t *testing.T) {
	s := proctest.StartServer(t)
	_, errOut, code := runFenced(t, "cluster", "transfer-leader", "--endpoints", s.Addr)
	if code == 0 || strings.Contains(errOut, "internal") || !strings.Contains(errOut, "cluster add") {
		t.Fatalf("exit %d, stderr %q; want a failure that says to add a member first", code, errOut)
	}
}

// Every line a member writes is JSON, also when the leader dies under a
// stream a follower is forwarding (the reverse proxy's own errors).
func TestEdge_LogIsJSONUnderForwarding(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	lock := startFenced(t, nil, "lock", "held", "--ttl", "2s", "--endpoints", followers[0].Addr, "--", "sh", "-c", "exec sleep 600 >/dev/null 2>&1")
	eventually(t, "the lock is held through a follower", 20*time.Second, func() bool {
		out, _, _ := runFenced(t, "status", "held", "--endpoints", followers[1].Addr)
		return strings.Contains(out, "token")
	})
	// The holder's acquire and its session's keep-alive stream (the SDK
	// renews over one open KeepAlive stream, not a call per renewal) go
	// through followers[0], so streams are open when the leader dies under
	// them. The keep-alive stream may open after the grant is visible.
	eventually(t, "followers[0] forwards the holder's acquire and keep-alive stream (2 or more requests)", 20*time.Second, func() bool {
		return forwarded(t, followers[0].Addr) >= 2
	})
	leader.Kill()
	eventually(t, "the lock is lost or kept with a new leader", 30*time.Second, func() bool {
		out, _, code := runFenced(t, "cluster", "status", "--json", "--endpoints", proctest.Endpoints(followers))
		return code == 0 && strings.Contains(out, `"leader"`)
	})
	_ = lock
	for _, s := range followers {
		for i, line := range strings.Split(s.Log(), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			if !json.Valid([]byte(line)) {
				t.Errorf("%s log line %d is not JSON: %q", s.NodeID, i+1, line)
			}
		}
	}
}

// forwarded reads fenced_forwarded_requests_total from a member's metrics.
func forwarded(t *testing.T, addr string) float64 {
	t.Helper()
	return metricOf(t, addr, "fenced_forwarded_requests_total")
}

// metricOf reads an unlabelled metric from a member's metrics: -1 when
// they do not answer, 0 when it is not there.
func metricOf(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
