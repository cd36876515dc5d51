package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// diskTestArgs make a log segment fill after a few hundred entries, so that
// the test reaches the creation of the next one quickly, and make the node
// give up on its disk 4s after its log writes began to fail.
var diskTestArgs = []string{"--wal-segment-size", "65536", "--disk-stall-timeout", "4s"}

// stallExitLine is what the node says when it exits because its disk stalled.
const stallExitLine = "exiting so that a supervisor restarts the node"

// A server running as an unprivileged user whose WAL directory stops being
// writable cannot create its next log segment: /healthz and /readyz turn
// 503 with the reason, fenced_disk_errors_total counts the failures,
// clients get errors rather than hanging, and the node exits non-zero
// (raft-wal never retries a failed segment creation, so the node would
// stay stuck until restarted); restarted once the directory is writable
// again, it serves, and never repeats a token.
func TestServe_UnwritableWALDirFailsHealthAndExits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server runs as user nobody so that file permissions apply to it, and only root can start it so")
	}
	const nobody = 65534
	base := t.TempDir()
	// The test's temporary dirs are root's, mode 0700: let nobody through.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(base, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	srv := newDiskTestServer(t, dataDir)
	srv.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	srv.Start()

	walDir := filepath.Join(dataDir, "raft", "wal")
	checkDiskFailure(t, srv, "permission denied",
		func() {
			if err := os.Chmod(walDir, 0o500); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := os.Chmod(walDir, 0o700); err != nil {
				t.Fatal(err)
			}
		})
}

// A server whose filesystem fills up (a 2 MiB tmpfs) cannot create its next
// log segment: the same as above, the cause being ENOSPC.
func TestServe_FullFilesystemFailsHealthAndExits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the data dir")
	}
	mnt := mountTmpfs(t)
	srv := newDiskTestServer(t, filepath.Join(mnt, "data"))
	srv.Start()

	filler := filepath.Join(mnt, "filler")
	checkDiskFailure(t, srv, "no space left on device",
		func() {
			// Leave less room than one segment needs (it is preallocated)
			// but enough for the meta database's term and vote updates.
			var st syscall.Statfs_t
			if err := syscall.Statfs(mnt, &st); err != nil {
				t.Fatal(err)
			}
			free := int64(st.Bavail) * st.Bsize
			if err := os.WriteFile(filler, make([]byte, free-40<<10), 0o600); err != nil {
				t.Fatalf("fill the filesystem: %v", err)
			}
		},
		func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		})
}

// newDiskTestServer returns a server on free ports with its data in
// dataDir, not yet started, killed when the test ends.
func newDiskTestServer(t *testing.T, dataDir string) *proctest.Server {
	addrs := proctest.FreeAddrs(t, 2)
	srv := &proctest.Server{Addr: addrs[0], PeerAddr: addrs[1], DataDir: dataDir, Args: diskTestArgs}
	srv.Init(t)
	t.Cleanup(srv.Kill)
	return srv
}

// checkDiskFailure takes locks on srv until one fails after breakDisk, then
// checks what the node reports and that it exits; after fixDisk a restart
// serves with a token above every token handed out before.
// The creation of the next segment fails with an error that contains cause.
func checkDiskFailure(t *testing.T, srv *proctest.Server, cause string, breakDisk, fixDisk func()) {
	c := newDiskClient(t, srv)
	base := c.base
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/healthz before the failure: %d %s", code, body)
	}

	breakDisk()
	var maxToken uint64
	var callErr error
	for i := 0; i < 5000 && callErr == nil; i++ {
		var tok uint64
		tok, callErr = c.acquire(t)
		maxToken = max(maxToken, tok)
	}
	if callErr == nil {
		t.Fatalf("5000 acquires succeeded on a broken disk\n%s", srv.Log())
	}
	t.Logf("client error after the disk broke (max token before: %d): %v", maxToken, callErr)

	// /healthz and /readyz say why, the metric counts the failures.
	health := waitUnhealthy(t, base, nil)
	failing := health.failing()
	if health.Status != "failing" || health.Reason == "" || failing["log_append"] == "" || !strings.Contains(failing["log_segment"], cause) {
		t.Errorf("/healthz = %+v, want status failing with a reason, op log_append and op log_segment failing with %q", health, cause)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "log_append") {
		t.Errorf("/readyz = %d %q, want 503 naming log_append", code, body)
	}
	for _, op := range []string{"log_append", "log_segment"} {
		if n := diskErrors(t, base, op); n < 1 {
			t.Errorf("fenced_disk_errors_total{op=%q} = %d, want at least 1", op, n)
		}
	}
	if _, metrics := get(t, base+"/metrics"); !strings.Contains(metrics, "fenced_disk_ok 0") {
		t.Errorf("/metrics lacks fenced_disk_ok 0")
	}
	// A later call fails too, and does not hang.
	if _, err := c.acquire(t); err == nil {
		t.Errorf("acquire succeeded on a broken disk")
	}

	// The disk recovers; raft-wal stays stuck, so the node exits non-zero
	// with the reason once --disk-stall-timeout has passed.
	fixDisk()
	if !srv.Wait(30 * time.Second) {
		t.Fatalf("node still running 30s after its log writes began to fail\n%s", srv.Log())
	}
	if code := srv.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(srv.Log(), stallExitLine) {
		t.Errorf("log lacks %q:\n%s", stallExitLine, srv.Log())
	}

	// A restart (what a supervisor does) serves again, above every token.
	srv.Start()
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz after restart: %d %s", code, body)
	}
	c.session, c.secret = c.newSession(t)
	tok, err := c.acquire(t)
	if err != nil {
		t.Fatalf("Acquire after restart: %v\n%s", err, srv.Log())
	}
	if tok <= maxToken {
		t.Fatalf("token %d after restart, want above %d (the highest handed out before)", tok, maxToken)
	}
}

// get fetches url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// A snapshot that cannot be written (the filesystem is full, while the log
// still has room in its preallocated segment) turns /healthz 503 with op
// snapshot and is counted; commits go on, the node does not exit, and once
// there is room again the next snapshot succeeds and /healthz is 200 again
// in the same process.
func TestServe_FailedSnapshotRecoversInProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the data dir")
	}
	mnt := mountTmpfs(t)
	srv := newDiskTestServer(t, filepath.Join(mnt, "data"))
	srv.Args = []string{"--wal-segment-size", "262144", "--disk-stall-timeout", "2s", "--snapshot-threshold", "1", "--snapshot-interval", "50ms"}
	srv.Start()
	c := newDiskClient(t, srv)
	base := c.base
	acquire := func() uint64 {
		t.Helper()
		tok, err := c.acquire(t)
		if err != nil {
			t.Fatalf("acquire: %v\n%s", err, srv.Log())
		}
		return tok
	}
	acquire()

	filler := fillFilesystem(t, mnt)
	// Commits go on (the segment is preallocated); each gives the next
	// snapshot something new to cover.
	health := waitUnhealthy(t, base, func() { acquire() })
	if !strings.Contains(health.failing()["snapshot"], "no space left on device") {
		t.Errorf("/healthz = %+v, want op snapshot failing with ENOSPC", health)
	}
	if n := diskErrors(t, base, "snapshot"); n < 1 {
		t.Errorf("fenced_disk_errors_total{op=\"snapshot\"} = %d, want at least 1", n)
	}
	// Longer than --disk-stall-timeout: a snapshot failure does not make
	// the node give up.
	time.Sleep(3 * time.Second)
	if srv.Wait(10 * time.Millisecond) {
		t.Fatalf("node exited on a snapshot failure\n%s", srv.Log())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	last := acquire()
	waitFor(t, 10*time.Second, func() bool {
		code, _ := get(t, base+"/healthz")
		return code == http.StatusOK
	})
	if tok := acquire(); tok <= last {
		t.Fatalf("token %d after recovery, want above %d", tok, last)
	}
}

// diskClient calls one server, every call bounded (a client that hangs is
// a failure), and takes locks of new names under one session.
type diskClient struct {
	base     string
	sessions fencedv1connect.SessionServiceClient
	locks    fencedv1connect.LockServiceClient
	session  uint64
	secret   string
	seq      uint64
}

func newDiskClient(t *testing.T, srv *proctest.Server) *diskClient {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + srv.Addr
	c := &diskClient{base: base, sessions: fencedv1connect.NewSessionServiceClient(hc, base), locks: fencedv1connect.NewLockServiceClient(hc, base)}
	c.session, c.secret = c.newSession(t)
	return c
}

// newSession creates a session with a TTL of a minute and returns its id
// and secret.
func (c *diskClient) newSession(t *testing.T) (uint64, string) {
	t.Helper()
	resp, err := c.sessions.CreateSession(context.Background(), connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 60000}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.Msg.Session, resp.Msg.Secret
}

// acquire takes a lock of a new name and returns its token, or the
// server's error; it fails the test when the call hangs.
func (c *diskClient) acquire(t *testing.T) (uint64, error) {
	t.Helper()
	c.seq++
	start := time.Now()
	resp, err := c.locks.Acquire(context.Background(), connect.NewRequest(&fencedv1.AcquireRequest{Name: fmt.Sprintf("disk-%d", c.seq), Session: c.session, Secret: c.secret, Seq: c.seq}))
	if err != nil {
		var netErr interface{ Timeout() bool }
		if errors.As(err, &netErr) && netErr.Timeout() {
			t.Fatalf("acquire %d hung for %v: %v", c.seq, time.Since(start), err)
		}
		return 0, err
	}
	return resp.Msg.GetGrant().GetToken(), nil
}

// healthReply is the JSON /healthz answers.
type healthReply struct {
	Status, Reason string
	Failing        []struct{ Op, Error string }
}

// failing returns the error of each failing op.
func (h healthReply) failing() map[string]string {
	m := map[string]string{}
	for _, f := range h.Failing {
		m[f.Op] = f.Error
	}
	return m
}

// waitUnhealthy waits up to 10s for /healthz at base to answer 503, calling
// each (when not nil) before every try, and returns what it said.
func waitUnhealthy(t *testing.T, base string, each func()) healthReply {
	t.Helper()
	var h healthReply
	waitFor(t, 10*time.Second, func() bool {
		if each != nil {
			each()
		}
		code, body := get(t, base+"/healthz")
		if code != http.StatusServiceUnavailable {
			return false
		}
		t.Logf("/healthz: %d %s", code, body)
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("/healthz body %q: %v", body, err)
		}
		return true
	})
	return h
}

// diskErrors returns fenced_disk_errors_total{op} from the node's metrics.
func diskErrors(t *testing.T, base, op string) int {
	t.Helper()
	_, metrics := get(t, base+"/metrics")
	m := regexp.MustCompile(`fenced_disk_errors_total\{op="` + op + `"\} (\d+)`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("no fenced_disk_errors_total{op=%q} in /metrics", op)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// mountTmpfs mounts a 2 MiB tmpfs for the test, unmounted when it ends
// (after the servers registered later are killed); the test is skipped
// when the mount is refused.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a 2 MiB tmpfs at %s (%v): this test needs a small filesystem to fill", mnt, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// fillFilesystem fills the filesystem of dir to its last byte with a file
// it returns the path of.
func fillFilesystem(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return path
		}
	}
}
