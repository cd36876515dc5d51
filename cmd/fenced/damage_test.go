package main_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/proctest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// The data dir damage tests stop a real server, damage its files the way a
// bad disk or a crash would, restart it and check that it either refuses
// to start, naming what is damaged, or starts with its token counter above
// every token a client received: never a token issued twice.

// grantedLocks holds locks l0..l(n-1) for one long session, one request
// each (so one log entry each), and returns the session and the tokens.
func grantedLocks(t *testing.T, srv *proctest.Server, n int) (session uint64, secret string, tokens []uint64) {
	t.Helper()
	base := "http://" + srv.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := fencedv1connect.NewSessionServiceClient(http.DefaultClient, base).CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 120000}))
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	session, secret = created.Msg.Session, created.Msg.Secret
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, base)
	for i := range n {
		resp, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: fmt.Sprintf("l%d", i), Session: session, Secret: secret, Seq: uint64(i + 1)}))
		if err != nil {
			t.Fatalf("Acquire l%d: %v", i, err)
		}
		tokens = append(tokens, resp.Msg.GetGrant().GetToken())
	}
	return session, secret, tokens
}

// acquireToken takes a new lock with a per-grant session and returns its
// token.
func acquireToken(t *testing.T, srv *proctest.Server, name string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr).Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, TtlMs: 60000}))
	if err != nil {
		t.Fatalf("Acquire %s: %v\n%s", name, err, srv.Log())
	}
	return resp.Msg.GetGrant().GetToken()
}

// walFrame is one frame of a raft-wal segment file.
type walFrame struct {
	typ      byte
	off, len int // header offset, payload length
}

// walSegments returns the segment files of the node's log, oldest first.
func walSegments(t *testing.T, dataDir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, "raft", "wal", "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments in %s (%v)", dataDir, err)
	}
	sort.Strings(segs)
	return segs
}

// walFrames reads the frames of a segment file up to the zeros after the
// last one (raft-wal's format: 32-byte file header, 8-byte frame headers,
// payloads padded to 8 bytes).
func walFrames(t *testing.T, path string) ([]byte, []walFrame) {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames []walFrame
	for off := 32; off+8 <= len(buf) && buf[off] != 0; {
		f := walFrame{typ: buf[off], off: off}
		if f.typ != 3 {
			f.len = int(binary.LittleEndian.Uint32(buf[off+4:]))
		}
		frames = append(frames, f)
		off += 8 + (f.len+7)/8*8
	}
	return buf, frames
}

// entryFrames returns the entry frames among frames.
func entryFrames(frames []walFrame) []walFrame {
	var out []walFrame
	for _, f := range frames {
		if f.typ == 1 {
			out = append(out, f)
		}
	}
	return out
}

// tailSegment returns the path, bytes, frames and entry frames of the
// node's newest log segment.
func tailSegment(t *testing.T, dataDir string) (path string, buf []byte, frames, entries []walFrame) {
	t.Helper()
	segs := walSegments(t, dataDir)
	path = segs[len(segs)-1]
	buf, frames = walFrames(t, path)
	return path, buf, frames, entryFrames(frames)
}

// overwrite writes 8 bytes of 0xa5 at off in path.
func overwrite(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5}, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// refusesToStart restarts srv and checks that it exits non-zero within
// 20s with a log that says why, naming want.
func refusesToStart(t *testing.T, srv *proctest.Server, want string) {
	t.Helper()
	srv.StartNoWait()
	if !srv.Wait(20 * time.Second) {
		t.Fatalf("the server started on a damaged data dir:\n%s", srv.Log())
	}
	log := srv.Log()
	if code := srv.ExitCode(); code == 0 {
		t.Fatalf("exit code 0 on a damaged data dir:\n%s", log)
	}
	if !strings.Contains(log, "damaged") || !strings.Contains(log, want) {
		t.Fatalf("the log does not say that %s is damaged:\n%s", want, log)
	}
}

// Eight bytes overwritten in the middle of the log, in an entry's data or
// over a frame header, while the server is stopped: it refuses to start,
// naming the segment file, instead of skipping the entry (tokens one lower
// than clients were told) or silently dropping every entry after it.
func TestServe_LogDamagedInTheMiddleRefusesToStart(t *testing.T) {
	for _, where := range []string{"entry data", "frame header"} {
		t.Run(where, func(t *testing.T) {
			srv := proctest.StartServer(t)
			grantedLocks(t, srv, 20)
			srv.Kill()
			seg, _, _, entries := tailSegment(t, srv.DataDir)
			f := entries[len(entries)/2]
			off := f.off
			if where == "entry data" {
				off = f.off + 8 + f.len/2/8*8
			}
			overwrite(t, seg, off)
			refusesToStart(t, srv, filepath.Base(seg))
		})
	}
}

// The same in a sealed segment (small segments, so the log has several).
func TestServe_SealedSegmentDamagedRefusesToStart(t *testing.T) {
	srv := proctest.StartServer(t, "--wal-segment-size", "2048")
	grantedLocks(t, srv, 60)
	srv.Kill()
	segs := walSegments(t, srv.DataDir)
	if len(segs) < 2 {
		t.Fatalf("%d segments, want at least 2", len(segs))
	}
	seg := segs[0] // sealed: a later one exists
	_, frames := walFrames(t, seg)
	overwrite(t, seg, entryFrames(frames)[2].off+8)
	refusesToStart(t, srv, filepath.Base(seg))
}

// Eight bytes overwritten in the log's last batch, holding an acknowledged
// grant. raft-wal takes that for a torn write and drops the batch. While
// the machine has not restarted since the log was written, no write can
// have been torn (a killed process leaves what it wrote in the kernel's
// cache): the node refuses to start.
func TestServe_LastBatchDamagedRefusesToStart(t *testing.T) {
	srv := proctest.StartServer(t)
	grantedLocks(t, srv, 5)
	srv.Kill()
	seg, _, _, entries := tailSegment(t, srv.DataDir)
	f := entries[len(entries)-1]
	overwrite(t, seg, f.off+8+f.len/2/8*8)
	refusesToStart(t, srv, filepath.Base(seg))
}

// The same after a power loss (the log's recorded boot id is another
// boot's): the damage cannot be told from a torn write, and the batch is
// dropped with its grant; but the node restarts its counter above the
// reservation it recorded before handing the token out, so no token a
// client received is issued again.
func TestServe_LastBatchDamagedNeverReissuesAToken(t *testing.T) {
	srv := proctest.StartServer(t)
	_, _, tokens := grantedLocks(t, srv, 5)
	srv.Kill()
	seg, _, _, entries := tailSegment(t, srv.DataDir)
	f := entries[len(entries)-1]
	overwrite(t, seg, f.off+8+f.len/2/8*8)
	if err := os.WriteFile(filepath.Join(srv.DataDir, "raft", "wal", "boot-id"), []byte("an-earlier-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !strings.Contains(srv.Log(), "dropping the log's last write") {
		t.Errorf("no warning about the dropped batch:\n%s", srv.Log())
	}
	highest := tokens[len(tokens)-1]
	if got := acquireToken(t, srv, "after"); got <= highest {
		t.Fatalf("token %d after the restart; clients already hold tokens up to %d (%v)", got, highest, tokens)
	}
}

// A torn write, as a crash during an append leaves it: a partial entry
// after the last commit frame, never acknowledged. The node starts, drops
// only that, and every acknowledged grant is still there.
func TestServe_TornTailLosesNothingAcknowledged(t *testing.T) {
	srv := proctest.StartServer(t)
	session, secret, tokens := grantedLocks(t, srv, 5)
	srv.Kill()
	seg, buf, frames, entries := tailSegment(t, srv.DataDir)
	last := frames[len(frames)-1]
	if last.typ != 3 {
		t.Fatalf("the log does not end with a commit frame: %+v", last)
	}
	// A copy of the last entry frame, cut off in the middle of its data,
	// right after the last commit frame.
	e := entries[len(entries)-1]
	torn := append([]byte(nil), buf[e.off:e.off+8+e.len/2]...)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, int64(last.off+8)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	srv.Start()

	// Retrying each acquire with its (session, seq) returns the original
	// grant: nothing acknowledged was lost.
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, want := range tokens {
		resp, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: fmt.Sprintf("l%d", i), Session: session, Secret: secret, Seq: uint64(i + 1)}))
		if err != nil {
			t.Fatalf("retry acquire l%d: %v\n%s", i, err, srv.Log())
		}
		if got := resp.Msg.GetGrant().GetToken(); got != want {
			t.Fatalf("l%d: token %d after the restart, want the acknowledged %d", i, got, want)
		}
	}
	if got := acquireToken(t, srv, "after"); got <= tokens[len(tokens)-1] {
		t.Fatalf("token %d after the restart, want above %d", got, tokens[len(tokens)-1])
	}
}

// A snapshot whose state file is damaged: the node refuses to start,
// naming the snapshot, rather than fall back to an older one the log was
// compacted past.
func TestServe_SnapshotDamagedRefusesToStart(t *testing.T) {
	srv := proctest.StartServer(t, "--snapshot-threshold", "1", "--snapshot-interval", "20ms", "--trailing-logs", "0")
	start := time.Now()
	grantedLocks(t, srv, 5)
	deadline := time.Now().Add(10 * time.Second)
	for !snapshotSince(srv.DataDir, start) {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Kill()
	// The newest snapshot, as raft orders them: by term, index and time,
	// from the names TERM-INDEX-MILLIS.
	states, _ := filepath.Glob(filepath.Join(srv.DataDir, "raft", "snapshots", "*", "state.bin"))
	var newest string
	var newestTerm, newestIndex, newestMs uint64
	for _, st := range states {
		var term, index, ms uint64
		dir := filepath.Dir(st)
		// A snapshot the kill interrupted is a .tmp directory, which raft
		// ignores; only complete ones (with meta.json) count.
		if strings.HasSuffix(dir, ".tmp") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(filepath.Base(dir), "%d-%d-%d", &term, &index, &ms); err != nil {
			continue
		}
		if term > newestTerm || (term == newestTerm && (index > newestIndex || (index == newestIndex && ms > newestMs))) {
			newest, newestTerm, newestIndex, newestMs = st, term, index, ms
		}
	}
	if newest == "" {
		t.Fatalf("no snapshot state file among %v", states)
	}
	overwrite(t, newest, 0)
	refusesToStart(t, srv, filepath.Base(filepath.Dir(newest)))
}

// A node that cannot record a new token reservation stops: the grant that
// needed it reaches no client, and the process exits non-zero, saying why.
func TestServe_ReservationNotRecordedStopsTheNode(t *testing.T) {
	srv := proctest.StartServer(t, "--token-reserve-block", "2")
	path := filepath.Join(srv.DataDir, "token-reservation")
	// A non-empty directory in its place: the rename that records the
	// next reservation fails.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	locks := fencedv1connect.NewLockServiceClient(http.DefaultClient, "http://"+srv.Addr)
	var tokens []uint64
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: fmt.Sprintf("l%d", i), TtlMs: 60000}))
		cancel()
		if err != nil {
			break
		}
		tokens = append(tokens, resp.Msg.GetGrant().GetToken())
	}
	if !srv.Wait(20 * time.Second) {
		t.Fatalf("the server still runs after it could not record a reservation; tokens %v\n%s", tokens, srv.Log())
	}
	if len(tokens) > 2 {
		t.Fatalf("tokens %v handed out past the recorded reservation 2", tokens)
	}
	log := srv.Log()
	if srv.ExitCode() == 0 || !strings.Contains(log, "record token reservation") {
		t.Fatalf("exit code %d; the log does not say the reservation could not be recorded:\n%s", srv.ExitCode(), log)
	}
}
