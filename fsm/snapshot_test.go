package fsm_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

var update = flag.Bool("update", false, "rewrite fsm/testdata/snapshot-v1.bin from the current code")

// snapshotGolden is a snapshot written before the state machine was split
// into primitives; every later version must restore it unchanged.
var snapshotGolden = filepath.Join("testdata", "snapshot-v1.bin")

// goldenState drives a machine through every part of the state: sessions
// (with a request id, remembered replies and a forgotten floor), held locks,
// queues, a promoted waiter, the kv (values, a tombstone, remembered
// request ids), registered nodes and a leadership term.
func goldenState(t *testing.T) *fsm.Machine {
	t.Helper()
	m := fsm.New(nil)
	m.Apply(&statev1.Command{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "golden", TokenFloor: 40}}})
	m.Apply(&statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 7}}})
	m.Apply(&statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: "n1", ApiAddr: "127.0.0.1:7700"}}})
	m.Apply(&statev1.Command{Op: &statev1.Command_RegisterNode{RegisterNode: &statev1.RegisterNode{Id: "n2", ApiAddr: "127.0.0.1:7710"}}})
	a := createSession(t, m)
	b := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{RequestId: "open-b", TtlMs: 5000}}}).Session
	c := createSession(t, m)
	now := func(ms int64, cmd *statev1.Command) *statev1.Command { cmd.NowUnixMs = ms; return cmd }
	acq := func(s, seq uint64, name string, wait bool) *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: seq, Name: name, Wait: wait}}}
	}
	m.Apply(now(1000, acq(a, 1, "alpha", false)))
	m.Apply(now(1001, acq(b, 1, "alpha", true)))
	m.Apply(now(1002, acq(c, 1, "alpha", true)))
	m.Apply(now(1003, acq(c, 2, "beta", false)))
	m.Apply(now(1004, acq(a, 2, "gamma", false)))
	m.Apply(now(1005, &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: a, Seq: 3, Name: "gamma"}}}))
	m.Apply(now(1006, acq(b, 2, "beta", false))) // not granted: c holds it
	m.Apply(now(1007, &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "delta", TtlMs: 2000, RequestId: "one-shot"}}}))
	for seq := uint64(10); seq < 80; seq++ { // pushes a's replies past the window
		m.Apply(now(2000+int64(seq), acq(a, seq, "alpha", false)))
	}
	m.Apply(now(3000, &statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: a, Seq: 80, Name: "alpha"}}})) // promotes b
	kv := func(w *statev1.KVWrite) { m.Apply(&statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: w}}) }
	kv(&statev1.KVWrite{Key: "orders", Token: 41, Value: []byte("v1"), RequestId: "w1"})
	kv(&statev1.KVWrite{Key: "orders", Token: 43, Value: []byte("v2"), HasIfVersion: true, IfVersion: 1})
	kv(&statev1.KVWrite{Key: "gone", Token: 42, Value: []byte("x")})
	kv(&statev1.KVWrite{Key: "gone", Token: 44, Delete: true, RequestId: "w2"})
	return m
}

// versioned returns a snapshot written before format versions as this
// build writes it: State.format_version (field 50) is its last field.
func versioned(golden []byte) []byte {
	b := append([]byte(nil), golden...)
	b = protowire.AppendTag(b, 50, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(fsm.FormatVersion))
}

// A snapshot written by the code before the primitives' shared parts
// restores, and snapshots again to the same bytes.
func TestSnapshot_RestoresEarlierFormat(t *testing.T) {
	data := mustSnapshot(t, goldenState(t))
	if *update {
		if err := os.WriteFile(snapshotGolden, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(snapshotGolden)
	if err != nil {
		t.Fatal(err)
	}
	// The golden file predates format versions (version 1 by default);
	// a snapshot now ends with its format version.
	if !bytes.Equal(data, versioned(golden)) {
		t.Errorf("the same commands now snapshot to other bytes than %s", snapshotGolden)
	}
	m := fsm.New(nil)
	if err := m.Restore(golden); err != nil {
		t.Fatalf("Restore(%s): %v", snapshotGolden, err)
	}
	if again := mustSnapshot(t, m); !bytes.Equal(again, versioned(golden)) {
		t.Fatal("a restored snapshot does not snapshot to the same bytes")
	}
	if info := m.Lock("alpha"); !info.Held() || info.Holder.Session != 2 || len(info.Waiters) != 1 || info.Waiters[0] != 3 {
		t.Fatalf("Lock(alpha)=%+v, want held by session 2 with session 3 waiting", info)
	}
	if m.Issuer() != "golden" || m.LeaderTerm() != 7 || m.NodeAPIAddr("n2") != "127.0.0.1:7710" {
		t.Fatalf("issuer %q, term %d, n2 at %q", m.Issuer(), m.LeaderTerm(), m.NodeAPIAddr("n2"))
	}
	// The restored de-duplication tables answer retries as before.
	retry := m.Apply(&statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: "orders", Token: 41, Value: []byte("v1"), RequestId: "w1"}}})
	if retry.Err != nil || retry.KV.Version != 1 {
		t.Fatalf("retried kv write after restore=%+v, want the original version 1", retry)
	}
	if res := acquire(m, 1, 5, "alpha", false); res.Err == nil {
		t.Fatal("a seq below the restored floor was accepted")
	}
}

// A state large enough that the restore's invariant checks run side by
// side (parallelCheckSize) restores to the same bytes and the same
// sessions, and one with two locks holding one token is still refused.
func TestMachine_RestoreLargeState(t *testing.T) {
	const n = 12000
	m := holdersMachine(t, n)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := fsm.New(nil)
	if err := r.Restore(snap); err != nil {
		t.Fatalf("Restore of %d holders: %v", n, err)
	}
	again, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, again) {
		t.Fatalf("the restored state of %d holders encodes to %d bytes unlike the %d restored", n, len(again), len(snap))
	}

	// SessionTTLs, which the leader's expiry table is rebuilt from after a
	// restore, lists what Sessions does, in the same order.
	infos, ttls := r.Sessions(), r.SessionTTLs()
	if len(infos) != n || len(ttls) != n {
		t.Fatalf("%d sessions, %d session TTLs; want %d", len(infos), len(ttls), n)
	}
	for i, si := range infos {
		if ttls[i] != (fsm.SessionTTL{ID: si.ID, TTLMs: si.TTLMs}) {
			t.Fatalf("SessionTTLs()[%d] = %+v; Sessions()[%d] is session %d with TTL %dms", i, ttls[i], i, si.ID, si.TTLMs)
		}
	}

	var st statev1.State
	if err := proto.Unmarshal(snap, &st); err != nil {
		t.Fatal(err)
	}
	locks := st.GetLocks()
	locks[len(locks)-1].Token = locks[0].GetToken()
	bad, err := proto.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.New(nil).Restore(bad); err == nil {
		t.Fatal("a large state with two locks holding one token restored")
	}
}
