package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// pushStdin runs "fenced queue push QUEUE" with stdin as the payload.
func pushStdin(t *testing.T, addr, queue, stdin string) string {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t), "queue", "push", queue, "--endpoints", addr)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("push from stdin: %v: %s", err, out)
	}
	return string(out)
}

func claimJSON(t *testing.T, addr string, args ...string) (item uint64, token fence.Token, payload string) {
	t.Helper()
	out, errOut, code := runFenced(t, append([]string{"queue", "claim", "--json", "--endpoints", addr}, args...)...)
	if code != 0 {
		t.Fatalf("claim %v: exit %d: %s", args, code, errOut)
	}
	var c struct{ Item, Token, Payload, Scope, Kind string }
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("claim --json output %q: %v", out, err)
	}
	item, _ = strconv.ParseUint(c.Item, 10, 64)
	token, _ = fence.ParseToken(c.Token)
	if c.Kind != "claim" || c.Scope != args[0]+"/"+c.Item {
		t.Fatalf("claim kind %q scope %q", c.Kind, c.Scope)
	}
	return item, token, c.Payload
}

// The queue commands end to end: push (argument, stdin, dedupe key),
// claim, a stale ack refused with exit 5 and changing nothing, the ack,
// and bad input refused with the state unchanged.
func TestQueueCLI_PushClaimAck(t *testing.T) {
	srv := proctest.StartServer(t, "--queue-max-payload", "64")
	ep := []string{"--endpoints", srv.Addr}
	stats := func() string {
		out, errOut, code := runFenced(t, append([]string{"queue", "stats", "orders", "--items", "10"}, ep...)...)
		if code != 0 {
			t.Fatalf("stats: exit %d: %s", code, errOut)
		}
		return out
	}
	if out, _, code := runFenced(t, append([]string{"queue", "push", "orders", "order-1", "--dedupe-key", "o1"}, ep...)...); code != 0 || out != "orders: pushed item 1\n" {
		t.Fatalf("push: exit %d %q", code, out)
	}
	if out, _, code := runFenced(t, append([]string{"queue", "push", "orders", "order-1 again", "--dedupe-key", "o1"}, ep...)...); code != 0 || !strings.Contains(out, "already pushed (same dedupe key) item 1") {
		t.Fatalf("retried push: exit %d %q", code, out)
	}
	if out := pushStdin(t, srv.Addr, "orders", "order-2"); out != "orders: pushed item 2\n" {
		t.Fatalf("push from stdin: %q", out)
	}
	item, tok, payload := claimJSON(t, srv.Addr, "orders", "--visibility", "30s")
	if item != 1 || payload != "order-1" {
		t.Fatalf("claimed item %d %q, want the oldest (1, order-1)", item, payload)
	}
	before := stats()
	bad := [][]string{
		{"queue", "ack", "orders", "1", "--token", (tok + 1).String()},
		{"queue", "nack", "orders", "1", "--token", (tok + 5).String()},
		{"queue", "ack", "orders", "9", "--token", tok.String()},
		{"queue", "push", "orders", strings.Repeat("x", 65)},
		{"queue", "push", "bad\x01name", "x"},
		{"queue", "claim", "orders", "--visibility", "0s"},
		{"queue", "claim", "orders", "--visibility", "13h"},
		{"queue", "ack", "orders", "zero", "--token", tok.String()},
	}
	wantCode := []int{5, 5, 2, 1, 2, 2, 2, 2}
	for i, args := range bad {
		_, errOut, code := runFenced(t, append(args, ep...)...)
		if code != wantCode[i] {
			t.Errorf("%v: exit %d, want %d: %s", args, code, wantCode[i], errOut)
		}
		if strings.TrimSpace(errOut) == "" {
			t.Errorf("%v: no error message", args)
		}
	}
	if after := stats(); after != before {
		t.Fatalf("refused commands changed the queue:\nbefore %s\nafter %s", before, after)
	}
	if _, errOut, code := runFenced(t, append([]string{"queue", "ack", "orders", "1", "--token", tok.String()}, ep...)...); code != 0 {
		t.Fatalf("ack: exit %d: %s", code, errOut)
	}
	if out := stats(); !strings.Contains(out, "orders: 1 available, 0 delayed, 0 claimed") || strings.Contains(out, "item 1:") {
		t.Fatalf("stats after ack: %s", out)
	}
}

// fenced work acks every item whose CMD succeeded, with the next claim
// (--ack-with-claim, the default), alone, or in batches (--batch 3: up to
// 3 claimed at once, acked with the next claim, the last alone): nothing
// is left in the queue, and each item ran once, in order.
func TestWork_AckWithClaim(t *testing.T) {
	for _, flag := range []string{"--ack-with-claim=true", "--ack-with-claim=false", "--batch=3"} {
		srv := proctest.StartServer(t)
		ep := []string{"--endpoints", srv.Addr}
		for _, p := range []string{"a", "b", "c", "d"} {
			if _, errOut, code := runFenced(t, append([]string{"queue", "push", "jobs", p}, ep...)...); code != 0 {
				t.Fatal(errOut)
			}
		}
		log := filepath.Join(t.TempDir(), "log")
		w := startFenced(t, nil, append([]string{"work", "jobs", "--max-items", "4", flag}, append(ep, "--", "sh", "-c", "cat >> "+log)...)...)
		if code := w.wait(t, 60*time.Second); code != 0 || w.stderr.String() != "" {
			t.Fatalf("work %s: exit %d: %s", flag, code, w.stderr.String())
		}
		if b, _ := os.ReadFile(log); string(b) != "abcd" {
			t.Fatalf("work %s ran CMD on %q, want abcd once each", flag, b)
		}
		out, _, _ := runFenced(t, append([]string{"queue", "stats", "jobs"}, ep...)...)
		if !strings.Contains(out, "jobs: 0 available, 0 delayed, 0 claimed") {
			t.Fatalf("after work %s: %s, want every item acked", flag, out)
		}
	}
}

// fenced work runs CMD per item with the payload on stdin and the claim
// in the environment, acks on exit 0, nacks otherwise (with
// --nack-delay), and exits after --max-items.
func TestWork_AcksNacksAndStops(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := []string{"--endpoints", srv.Addr}
	for _, p := range []string{"good-1", "bad", "good-2"} {
		if _, errOut, code := runFenced(t, append([]string{"queue", "push", "jobs", p, "--max-deliveries", "3"}, ep...)...); code != 0 {
			t.Fatal(errOut)
		}
	}
	log := filepath.Join(t.TempDir(), "log")
	script := `read p; echo "$FENCED_QUEUE $FENCED_ITEM $FENCED_TOKEN $FENCED_SCOPE $p" >> ` + log + `; [ "$p" != bad ]`
	w := startFenced(t, nil, append([]string{"work", "jobs", "--max-items", "3", "--nack-delay", "1h"}, append(ep, "--", "sh", "-c", script)...)...)
	if code := w.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("work: exit %d: %s", code, w.stderr.String())
	}
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("CMD ran %d times, want 3 (--max-items):\n%s", len(lines), b)
	}
	for i, want := range []string{"jobs 1 ", "jobs 2 ", "jobs 3 "} {
		f := strings.Fields(lines[i])
		if !strings.HasPrefix(lines[i], want) || len(f) != 5 || f[3] != "jobs/"+f[1] {
			t.Errorf("run %d: %q, want queue, item, token, scope and payload", i, lines[i])
		}
	}
	if !strings.Contains(w.stderr.String(), "jobs/2 token") || !strings.Contains(w.stderr.String(), "nacked") {
		t.Errorf("work's stderr does not report the nack: %q", w.stderr.String())
	}
	out, _, _ := runFenced(t, append([]string{"queue", "stats", "jobs", "--items", "5"}, ep...)...)
	if !strings.Contains(out, "jobs: 0 available, 1 delayed") || !strings.Contains(out, "item 2: delayed until ") {
		t.Fatalf("after work: %s", out)
	}
}

// A paused `fenced work` whose claim expired: another worker claims the
// item with a higher token; when the paused worker resumes, its extend is
// refused, it kills CMD, says which claim was lost, and its late ack is
// never sent as a success.
func TestWork_LostClaimKillsCMD(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := []string{"--endpoints", srv.Addr}
	if _, errOut, code := runFenced(t, append([]string{"queue", "push", "jobs", "slow"}, ep...)...); code != 0 {
		t.Fatal(errOut)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	w := startFenced(t, nil, append([]string{"work", "jobs", "--visibility", "1s", "--ttl", "60s", "--max-items", "1", "--grace", "1s"}, append(ep, "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 120")...)...)
	var pid int
	eventually(t, "CMD started", 30*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	signalGroup(t, w.cmd.Process.Pid, syscall.SIGSTOP) // fenced work only: CMD has its own group
	item, second, _ := claimJSON(t, srv.Addr, "jobs", "--visibility", "30s", "--wait", "20s")
	if item != 1 {
		t.Fatalf("the second worker claimed item %d, want 1", item)
	}
	signalGroup(t, w.cmd.Process.Pid, syscall.SIGCONT)
	if code := w.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("work: exit %d: %s", code, w.stderr.String())
	}
	if msg := w.stderr.String(); !strings.Contains(msg, "claim of jobs/1 lost (token ") {
		t.Fatalf("work's stderr does not say which claim was lost: %q", msg)
	}
	eventually(t, "CMD killed", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	// The item is the second worker's: its claim still stands.
	out, _, _ := runFenced(t, append([]string{"queue", "stats", "jobs", "--items", "1"}, ep...)...)
	if !strings.Contains(out, "token "+second.String()) {
		t.Fatalf("the second worker's claim does not stand: %s", out)
	}
	if _, errOut, code := runFenced(t, append([]string{"queue", "ack", "jobs", "1", "--token", second.String()}, ep...)...); code != 0 {
		t.Fatalf("the second worker's ack: exit %d %s", code, errOut)
	}
}

// A claim on a 3-node cluster, every call through followers: its token
// writes the fenced kv key of its scope (jobs/1) while it lives; it
// survives the leader's SIGKILL (the new leader restarts the claim's
// visibility timeout, stamped with its own term); then the new leader
// expires it, the item is claimed again with a higher token, and the old
// token's ack and kv write are refused.
func TestCluster_QueueClaimAcrossLeaderChange(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	via := []string{"--endpoints", followers[0].Addr + "," + followers[1].Addr}
	if _, errOut, code := runFenced(t, append([]string{"queue", "push", "jobs", "payload"}, via...)...); code != 0 {
		t.Fatal(errOut)
	}
	item, first, _ := claimJSON(t, followers[0].Addr+","+followers[1].Addr, "jobs", "--visibility", "4s")
	if _, errOut, code := runFenced(t, append([]string{"kv", "put", "jobs/1", "by-first", "--token", first.String()}, via...)...); code != 0 {
		t.Fatalf("kv put with the live claim's token: exit %d %s", code, errOut)
	}
	leader.Kill()
	// The claim is still the item's right after the takeover.
	eventually(t, "stats through a follower after the leader's death", 30*time.Second, func() bool {
		out, _, code := runFenced(t, append([]string{"queue", "stats", "jobs", "--items", "1"}, via...)...)
		return code == 0 && strings.Contains(out, "token "+first.String())
	})
	item2, second, _ := claimJSON(t, followers[0].Addr+","+followers[1].Addr, "jobs", "--visibility", "30s", "--wait", "30s")
	if item2 != item || second <= first {
		t.Fatalf("after expiry: item %d token %d, want item %d above token %d", item2, second, item, first)
	}
	if _, errOut, code := runFenced(t, append([]string{"queue", "ack", "jobs", "1", "--token", first.String()}, via...)...); code != 5 {
		t.Fatalf("ack with the expired claim's token: exit %d %s, want 5", code, errOut)
	}
	if _, errOut, code := runFenced(t, append([]string{"kv", "put", "jobs/1", "late", "--token", first.String()}, via...)...); code != 7 && code != 5 {
		t.Fatalf("kv put with the expired claim's token: exit %d %s, want refused", code, errOut)
	}
	if _, errOut, code := runFenced(t, append([]string{"queue", "ack", "jobs", "1", "--token", second.String()}, via...)...); code != 0 {
		t.Fatalf("ack with the live claim: exit %d %s", code, errOut)
	}
}

// fenced queue push --lines pushes every line of stdin as an item, --batch
// at a time; a batch with an item above the payload limit is refused
// whole (exit 1, nothing of it enqueued), and bad flags are usage errors
// that push nothing.
func TestQueueCLI_PushLines(t *testing.T) {
	srv := proctest.StartServer(t, "--queue-max-payload", "8")
	ep := []string{"--endpoints", srv.Addr}
	push := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(proctest.Binary(t), append(append([]string{"queue", "push", "lines"}, args...), ep...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := push("a\nb\nc\n", "--lines", "--batch", "2"); code != 0 || out != "lines: pushed item 1\nlines: pushed item 2\nlines: pushed item 3\n" {
		t.Fatalf("push --lines: exit %d %q %s", code, out, errOut)
	}
	stats := func() string {
		out, _, _ := runFenced(t, append([]string{"queue", "stats", "lines"}, ep...)...)
		return out
	}
	before := stats()
	if !strings.Contains(before, "lines: 3 available") {
		t.Fatalf("after push --lines: %s", before)
	}
	for _, tt := range []struct {
		stdin string
		args  []string
		code  int
	}{
		{"ok\n" + strings.Repeat("x", 9) + "\n", []string{"--lines"}, 1}, // one item above 8 bytes: the batch is refused
		{"a\n", []string{"--lines", "--batch", "0"}, 2},
		{"a\n", []string{"--lines", "--batch", "33"}, 2},
		{"a\n", []string{"--lines", "--dedupe-key", "k"}, 2},
		{"", []string{"--lines"}, 2},
	} {
		if _, errOut, code := push(tt.stdin, tt.args...); code != tt.code || strings.TrimSpace(errOut) == "" {
			t.Errorf("push %v: exit %d, want %d: %q", tt.args, code, tt.code, errOut)
		}
	}
	if after := stats(); after != before {
		t.Fatalf("refused pushes changed the queue:\nbefore %s\nafter %s", before, after)
	}
	for i, want := range []string{"a", "b", "c"} {
		if item, _, payload := claimJSON(t, srv.Addr, "lines", "--visibility", "30s"); item != uint64(i+1) || payload != want {
			t.Fatalf("claim %d: item %d %q, want %d %q", i, item, payload, i+1, want)
		}
	}
}
