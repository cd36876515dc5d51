package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/internal/proctest"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
)

// grantLoad takes and releases per-grant locks from several goroutines
// until stopped, and remembers the highest token acknowledged.
type grantLoad struct {
	high   atomic.Uint64
	grants atomic.Int64
	// backwards counts grants whose token was not above the same
	// worker's previous one (sequential, so each must be higher).
	backwards atomic.Int64
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startGrantLoad(t *testing.T, c *client.Client, workers int) *grantLoad {
	t.Helper()
	g := &grantLoad{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			name := "load-" + strconv.Itoa(w)
			var last fence.Token
			for {
				select {
				case <-g.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				l, err := c.Acquire(ctx, name, 10*time.Second)
				if err == nil {
					if l.Token() <= last {
						g.backwards.Add(1)
					}
					last = l.Token()
					g.raise(uint64(l.Token()))
					g.grants.Add(1)
					_ = l.Release(ctx)
				}
				cancel()
			}
		}()
	}
	return g
}

func (g *grantLoad) raise(tok uint64) {
	for {
		old := g.high.Load()
		if tok <= old || g.high.CompareAndSwap(old, tok) {
			return
		}
	}
}

// waitGrants waits until n more grants were acknowledged.
func (g *grantLoad) waitGrants(t *testing.T, n int64) {
	t.Helper()
	want := g.grants.Load() + n
	eventually(t, "grants under load", 30*time.Second, func() bool { return g.grants.Load() >= want })
}

func (g *grantLoad) halt() { close(g.stop); g.wg.Wait() }

type snapshotInfo struct {
	Issuer        string `json:"issuer"`
	LastToken     uint64 `json:"last_token,string"`
	ReservedToken uint64 `json:"reserved_token,string"`
}

// A real 3-node cluster under load is backed up through a follower; the
// load goes on after the save (tokens no backup holds), then the whole
// cluster is killed. A restore without a floor, or with one below the
// backup's tokens, is refused and builds nothing; a damaged, truncated or
// unknown-version file is refused and builds nothing. The restore with the
// guards' watermark as floor starts a new cluster whose first grant is
// above every token acknowledged before and after the save and above the
// floor, from a new issuer epoch a guard pinned to the old issuer refuses,
// saying it is a restore.
func TestSnapshot_SaveUnderLoadRestoreAboveEveryToken(t *testing.T) {
	// A block of 1000 (not the default): the load must issue tokens past
	// the backup's reservation within the test's wait.
	servers := proctest.StartCluster(t, 3, "--token-reserve-block", "1000")
	_, followers := leaderOf(t, servers)
	load := startGrantLoad(t, quietClient(t, servers[0].Addr, servers[1].Addr, servers[2].Addr), 4)
	defer func() {
		select {
		case <-load.stop:
		default:
			load.halt()
		}
	}()
	load.waitGrants(t, 20)

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	beforeSave := load.high.Load()
	out, errOut, code := runFenced(t, "snapshot", "save", file, "--endpoints", followers[0].Addr)
	if code != 0 {
		t.Fatalf("snapshot save: exit %d: %s%s", code, out, errOut)
	}
	if _, _, code := runFenced(t, "snapshot", "save", file, "--endpoints", followers[0].Addr); code != 2 {
		t.Fatalf("a second save over the same file: exit %d, want 2 (refused without --force)", code)
	}
	out, errOut, code = runFenced(t, "snapshot", "inspect", file, "--json")
	if code != 0 {
		t.Fatalf("snapshot inspect: exit %d: %s", code, errOut)
	}
	var info snapshotInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("inspect --json %q: %v", out, err)
	}
	if info.LastToken < beforeSave || info.Issuer == "" {
		t.Fatalf("backup %+v: last token below %d acknowledged before the save", info, beforeSave)
	}
	// Tokens after the save: in no backup, but at the resources.
	eventually(t, "tokens past the backup", 30*time.Second, func() bool { return load.high.Load() > info.ReservedToken+5 && load.high.Load() > info.LastToken+20 })
	load.halt()
	watermark := load.high.Load()
	for _, s := range servers {
		s.Kill()
	}

	restored := filepath.Join(dir, "restored")
	addrs := proctest.FreeAddrs(t, 2)
	restore := func(file string, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"snapshot", "restore", file, "--data-dir", restored, "--node-id", "r1", "--peer-listen", addrs[1]}, extra...)
		_, existed := os.Stat(restored)
		out, errOut, code := runFenced(t, args...)
		if code != 0 && os.IsNotExist(existed) {
			if _, err := os.Stat(restored); !os.IsNotExist(err) {
				t.Fatalf("restore %v failed (exit %d) but left %s behind (%v)", extra, code, restored, err)
			}
		}
		return out + errOut, code
	}
	if msg, code := restore(file); code != 2 || !strings.Contains(msg, "--token-floor") {
		t.Fatalf("restore without a floor: exit %d: %s", code, msg)
	}
	if msg, code := restore(file, "--token-floor", strconv.FormatUint(info.LastToken-1, 10)); code != 2 || !strings.Contains(msg, "below the backup's last token") {
		t.Fatalf("restore below the last token: exit %d: %s", code, msg)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	nl := strings.IndexByte(string(raw), '\n')
	damaged := map[string][]byte{
		"checksum mismatch":        flipByte(raw, nl+1+(len(raw)-nl)/2),
		"truncated":                raw[:len(raw)-7],
		"format version 2":         []byte(strings.Replace(string(raw), "fenced-snapshot 1 ", "fenced-snapshot 2 ", 1)),
		"bytes after":              append(append([]byte(nil), raw...), 'x'),
		"is not \"fenced-snapshot": []byte("not a backup\n"),
	}
	for want, body := range damaged {
		bad := filepath.Join(dir, "bad.snap")
		if err := os.WriteFile(bad, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if msg, code := restore(bad, "--token-floor", strconv.FormatUint(watermark, 10)); code == 0 || !strings.Contains(msg, want) {
			t.Errorf("restore of a file with %q: exit %d: %s", want, code, msg)
		}
	}

	msg, code := restore(file, "--token-floor", strconv.FormatUint(watermark, 10))
	if code != 0 {
		t.Fatalf("restore: exit %d: %s", code, msg)
	}
	if msg, code := restore(file, "--token-margin", "10"); code == 0 || !strings.Contains(msg, "not empty") {
		t.Fatalf("a restore over the restored data dir: exit %d: %s", code, msg)
	}
	if _, err := os.Stat(filepath.Join(restored, "raft", "snapshots")); err != nil {
		t.Fatalf("the refused second restore touched the first one's data dir: %v", err)
	}
	srv := &proctest.Server{NodeID: "r1", Addr: addrs[0], PeerAddr: addrs[1], DataDir: restored}
	srv.Init(t)
	srv.Start()
	t.Cleanup(srv.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := quietClient(t, srv.Addr).Acquire(ctx, "load-0", 10*time.Second)
	if err != nil {
		t.Fatalf("acquire on the restored cluster: %v\n%s", err, srv.Log())
	}
	g := l.Grant()
	if uint64(g.Token) <= watermark || uint64(g.Token) <= info.ReservedToken {
		t.Fatalf("first token of the restored cluster %d, want above every token handed out (%d) and the floor", g.Token, watermark)
	}
	if g.Issuer != fence.NextIssuerEpoch(info.Issuer) {
		t.Fatalf("restored issuer %q, want the next epoch of %q", g.Issuer, info.Issuer)
	}
	out, errOut, code = runFenced(t, "snapshot", "lineage", "--json", "--endpoints", srv.Addr)
	var lin struct {
		Issuer   string `json:"issuer"`
		Restores []struct {
			Issuer     string `json:"issuer"`
			LastToken  uint64 `json:"last_token,string"`
			TokenFloor uint64 `json:"token_floor,string"`
			NewIssuer  string `json:"new_issuer"`
		} `json:"restores"`
	}
	if err := json.Unmarshal([]byte(out), &lin); code != 0 || err != nil {
		t.Fatalf("snapshot lineage: exit %d, %v: %s%s", code, err, out, errOut)
	}
	if lin.Issuer != g.Issuer || len(lin.Restores) != 1 || lin.Restores[0].Issuer != info.Issuer || lin.Restores[0].LastToken != info.LastToken ||
		lin.Restores[0].TokenFloor != watermark || lin.Restores[0].NewIssuer != g.Issuer {
		t.Fatalf("lineage %+v, want one restore of %s (last token %d) above %d as %s", lin, info.Issuer, info.LastToken, watermark, g.Issuer)
	}
	pinned := guard.CheckIssuer(guard.ContextWithIssuer(ctx, g.Issuer), info.Issuer)
	if pinned == nil || !strings.Contains(pinned.Error(), "restored from a snapshot") {
		t.Fatalf("a guard pinned to the old issuer: %v, want a refusal naming the restore", pinned)
	}
}

func flipByte(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 0x40
	return out
}

// A member whose data dir holds a snapshot of a format version this build
// does not apply, or holding a field it does not know (both written by a
// newer release), refuses to start, names what it met and the upgrade
// rule (not damage), and exits 1; it never runs on a state it does not
// understand.
func TestServe_RefusesAFutureFormatSnapshot(t *testing.T) {
	newField := &statev1.State{Issuer: "future", LastToken: 5}
	newField.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	for name, c := range map[string]struct {
		st   *statev1.State
		want string
	}{
		"version": {&statev1.State{Issuer: "future", LastToken: 5, FormatVersion: fsm.FormatVersion + 1}, "format version 2"},
		"field":   {newField, "field 999 of fenced.state.v1.State"},
	} {
		st, err := proto.Marshal(c.st)
		if err != nil {
			t.Fatal(err)
		}
		addrs := proctest.FreeAddrs(t, 2)
		dir := filepath.Join(t.TempDir(), "data")
		if err := raftstore.Seed(dir, "n1", addrs[1], st); err != nil {
			t.Fatal(err)
		}
		f := startFenced(t, nil, "serve", "--data-dir", dir, "--node-id", "n1", "--listen", addrs[0], "--peer-listen", addrs[1])
		if code := f.wait(t, 30*time.Second); code != 1 {
			t.Fatalf("%s: serve on a newer release's snapshot: exit %d, want 1\n%s", name, code, f.stderr.String())
		}
		if msg := f.stderr.String(); !strings.Contains(msg, c.want) || !strings.Contains(msg, "upgrade this node") || !strings.Contains(msg, "Upgrades") || strings.Contains(msg, "damaged") {
			t.Fatalf("%s: serve's message does not name %q and the upgrade rule, or calls it damage:\n%s", name, c.want, msg)
		}
	}
}
