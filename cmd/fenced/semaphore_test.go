package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// Per-slot fencing, end to end with real processes: two `fenced semaphore
// run` holders of a semaphore of capacity 2 write to their slots' objects
// pool/0 and pool/1 at a guard. The holder of slot 1 and its writer are
// SIGSTOPped past their TTL; a third process takes the freed slot 1 (a
// higher token) and writes pool/1. Resumed, the paused holder is fenced
// out at pool/1 (rejected, with the new token required) and stopped with
// exit 4, while the holder of slot 0 keeps writing pool/0, accepted
// throughout, and keeps its permit.
func TestSemaphore_PausedSlotHolderFencedOut(t *testing.T) {
	srv := proctest.StartServer(t)
	res := &resource{}
	web := httptest.NewServer(res)
	defer web.Close()
	writer := []string{"FENCED_TEST_WRITER=" + web.URL}
	acceptedOn := func(object string) bool {
		for _, a := range res.snapshot() {
			if a.object == object && a.accepted {
				return true
			}
		}
		return false
	}

	zero := startFenced(t, writer, "semaphore", "run", "pool", "--capacity", "2", "--ttl", "3s", "--endpoints", srv.Addr, "--", os.Args[0])
	eventually(t, "slot 0's first accepted write", 20*time.Second, func() bool { return acceptedOn("pool/0") })
	one := startFenced(t, writer, "semaphore", "run", "pool", "--capacity", "2", "--ttl", "1s", "--endpoints", srv.Addr, "--", os.Args[0])
	eventually(t, "slot 1's first accepted write", 20*time.Second, func() bool { return acceptedOn("pool/1") })
	var paused attempt
	for _, a := range res.snapshot() {
		if a.object == "pool/1" {
			paused = a
			break
		}
	}
	signalGroup(t, one.cmd.Process.Pid, syscall.SIGSTOP)
	signalGroup(t, paused.pid, syscall.SIGSTOP)

	out, errOut, code := runFenced(t, "semaphore", "acquire", "pool", "--capacity", "2", "--ttl", "30s", "--wait", "20s", "--json", "--endpoints", srv.Addr)
	if code != 0 {
		t.Fatalf("third acquire: exit %d: %s", code, errOut)
	}
	var g struct{ Scope, Token, Kind string }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("acquire --json output %q: %v", out, err)
	}
	next, err := fence.ParseToken(g.Token)
	if err != nil || g.Scope != "pool/1" || g.Kind != "permit" || next <= paused.token {
		t.Fatalf("third permit %+v, want kind permit, scope pool/1 and a token above the paused holder's %d", g, paused.token)
	}
	req, _ := http.NewRequest(http.MethodPut, web.URL, nil)
	req.Header.Set("X-Fencing-Token", next.String())
	req.Header.Set("X-Object", "pool/1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("write by the next holder of slot 1: %v %v", resp, err)
	}
	resp.Body.Close()
	newWrite := len(res.snapshot()) - 1

	signalGroup(t, paused.pid, syscall.SIGCONT)
	signalGroup(t, one.cmd.Process.Pid, syscall.SIGCONT)
	if code := one.wait(t, 30*time.Second); code != 4 {
		t.Fatalf("paused holder exit code %d, want 4 (permits lost)\nstderr: %s", code, one.stderr.String())
	}
	if msg := one.stderr.String(); !strings.Contains(msg, `permits of "pool" lost (slots 1, tokens `+paused.token.String()+")") {
		t.Errorf("the paused holder's stderr does not say which permits were lost: %q", msg)
	}
	var rejected int
	for _, a := range res.snapshot()[newWrite+1:] {
		if a.token != paused.token {
			continue
		}
		if a.accepted {
			t.Fatalf("the paused holder's write with token %d was accepted after token %d:\n%s", a.token, next, fmtAttempts(res.snapshot()))
		}
		if a.required != next {
			t.Fatalf("stale write rejected with required token %d, want %d", a.required, next)
		}
		rejected++
	}
	if rejected == 0 {
		t.Fatalf("the resumed holder made no write; cannot show it was rejected:\n%s", fmtAttempts(res.snapshot()))
	}

	// Slot 0 was never touched: every write accepted, its holder still
	// running, and its writes after all this still accepted.
	before := len(res.snapshot())
	eventually(t, "slot 0 writes on", 20*time.Second, func() bool { return len(res.snapshot()) > before+3 })
	for _, a := range res.snapshot() {
		if a.object == "pool/0" && !a.accepted {
			t.Fatalf("a write of slot 0's holder was rejected:\n%s", fmtAttempts(res.snapshot()))
		}
	}
	select {
	case <-zero.done:
		t.Fatalf("slot 0's holder exited: %s", zero.stderr.String())
	default:
	}
	signalGroup(t, zero.cmd.Process.Pid, syscall.SIGTERM)
	if code := zero.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("slot 0's holder exit code %d after SIGTERM, want its CMD's 0\nstderr: %s", code, zero.stderr.String())
	}
	t.Logf("paused slot-1 token %d; next slot-1 token %d; %d stale writes rejected at pool/1; slot 0 unaffected", paused.token, next, rejected)
}

// fenced semaphore run passes the permits to CMD and releases them when
// it exits; bad flags are usage errors that take nothing.
func TestSemaphore_RunPassesPermits(t *testing.T) {
	srv := proctest.StartServer(t)
	out, errOut, code := runFenced(t, "semaphore", "run", "jobs", "--capacity", "3", "--permits", "2", "--endpoints", srv.Addr, "--",
		"sh", "-c", `echo "$FENCED_SEMAPHORE $FENCED_SLOT $FENCED_SLOTS $FENCED_TOKEN $FENCED_TOKENS"; exit 7`)
	if code != 7 {
		t.Fatalf("exit code %d, want CMD's 7; stderr %s", code, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 5 || f[0] != "jobs" || f[1] != "0" || f[2] != "0,1" || !strings.HasPrefix(f[4], f[3]+",") {
		t.Fatalf("CMD saw %q, want FENCED_SEMAPHORE jobs, FENCED_SLOT 0, FENCED_SLOTS 0,1 and the tokens", out)
	}
	if out, _, _ := runFenced(t, "semaphore", "describe", "jobs", "--endpoints", srv.Addr); out != "jobs: not in use\n" {
		t.Fatalf("describe after run exited: %q, want not in use", out)
	}
	for _, args := range [][]string{
		{"--capacity", "0"}, {"--capacity", "1000001"}, {"--capacity", "2", "--permits", "3"}, {"--capacity", "2", "--permits", "0"},
	} {
		cmd := append([]string{"semaphore", "acquire", "jobs", "--endpoints", srv.Addr}, args...)
		if _, errOut, code := runFenced(t, cmd...); code != 2 || !strings.Contains(errOut, "--") {
			t.Errorf("fenced %v: exit %d %q, want usage error 2", cmd, code, errOut)
		}
	}
	if out, _, _ := runFenced(t, "semaphore", "describe", "jobs", "--endpoints", srv.Addr); out != "jobs: not in use\n" {
		t.Fatalf("describe after refused acquires: %q", out)
	}
}

// fenced status lists a session's semaphore permits beside its locks,
// instead of showing a permit holder as holding nothing.
func TestSemaphore_StatusShowsPermitHolder(t *testing.T) {
	srv := proctest.StartServer(t)
	if _, errOut, code := runFenced(t, "semaphore", "acquire", "pool", "--capacity", "2", "--ttl", "30s", "--endpoints", srv.Addr); code != 0 {
		t.Fatalf("semaphore acquire: exit %d, %s", code, errOut)
	}
	out, _, _ := runFenced(t, "status", "--endpoints", srv.Addr)
	if !strings.Contains(out, "holds [semaphore:pool] waits []") {
		t.Fatalf("status:\n%s\nwant the session shown holding semaphore:pool", out)
	}
}
