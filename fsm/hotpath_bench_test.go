package fsm_test

import (
	"fmt"
	"testing"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The hot path of a lock cycle below the API server: the leader encodes
// each proposal into a Raft log entry (alone, or with the commands
// proposed at the same moment as one batch entry), every member decodes
// the entry and applies its commands. The benchmarks here measure each
// step with the commands as the server proposes them (a session's own
// lock, with the session's secret hash, the caller's quota and the clock
// of the proposal); alloc_budget_test.go holds their allocation counts to
// a budget.

// hotBatch is the number of sessions of the batch benchmarks: what 64
// independent clients put in one entry when they all propose at once.
const hotBatch = 64

// hotPath is a machine with sessions that each hold nothing yet, and the
// commands of their lock cycles.
type hotPath struct {
	m        *fsm.Machine
	acquires []*statev1.Command // one per session, on its own lock
	releases []*statev1.Command
	renewals []renewal // what a keep-alive checks: session and secret hash
}

type renewal struct {
	session uint64
	hash    []byte
}

// newHotPath returns a machine with n sessions, each with a secret, and
// their acquire and release commands.
func newHotPath(tb testing.TB, n int) *hotPath {
	tb.Helper()
	h := &hotPath{m: fsm.New(nil)}
	h.m.Apply(initCommand(0))
	for i := range n {
		hash := fsm.HashSecret(fmt.Appendf(nil, "secret of session %d", i))
		res := h.m.Apply(&statev1.Command{NowUnixMs: 1, Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{
			TtlMs: 10000, SecretHash: hash, Quota: hotQuota(),
		}}})
		if res.Err != nil {
			tb.Fatalf("create session: %v", res.Err)
		}
		name := fmt.Sprintf("bench/lock/%d", i)
		h.acquires = append(h.acquires, &statev1.Command{NowUnixMs: 2, Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{
			Session: res.Session, Name: name, Wait: true, Quota: hotQuota(), SecretHash: hash,
		}}})
		h.releases = append(h.releases, &statev1.Command{NowUnixMs: 3, Op: &statev1.Command_Release{Release: &statev1.Release{
			Session: res.Session, Name: name, Quota: hotQuota(), SecretHash: hash,
		}}})
		h.renewals = append(h.renewals, renewal{res.Session, hash})
	}
	return h
}

// hotQuota is the quota the server puts on every request: the caller's
// identity and the per-source limits.
func hotQuota() *statev1.Quota {
	return &statev1.Quota{Owner: "client-cert:bench", MaxSessions: 100000, MaxHeld: 100000, MaxWaiting: 100000}
}

// next gives session i's commands the seqs of its next cycle.
func (h *hotPath) next(i int, cycle uint64) {
	h.acquires[i].GetAcquire().Seq = 2*cycle + 1
	h.releases[i].GetRelease().Seq = 2*cycle + 2
}

// apply applies cmd, which must succeed; granted says whether it must be
// an acquire that was granted.
func (h *hotPath) apply(tb testing.TB, cmd *statev1.Command) {
	res := h.m.Apply(cmd)
	if res.Err != nil {
		tb.Fatalf("apply %T: %v", cmd.GetOp(), res.Err)
	}
	if _, acq := cmd.GetOp().(*statev1.Command_Acquire); acq && !res.Granted {
		tb.Fatal("acquire not granted")
	}
	if rel := cmd.GetRelease(); rel != nil && res.Release != fsm.Released {
		tb.Fatalf("release: %v", res.Release)
	}
}

// encode encodes the commands proposed together as one entry, as the
// server's codec does.
func encode(tb testing.TB, cmds ...*statev1.Command) []byte {
	b, err := fsm.EncodeEntry(len(cmds), func(i int) *statev1.Command { return cmds[i] })
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// decode decodes an entry, as the server's codec does.
func decode(tb testing.TB, entry []byte) []*statev1.Command {
	cmds, err := fsm.DecodeEntry(entry)
	if err != nil {
		tb.Fatal(err)
	}
	return cmds
}

// BenchmarkHotPath_EncodeAcquire measures the leader encoding one acquire
// as a log entry of its own.
func BenchmarkHotPath_EncodeAcquire(b *testing.B) {
	h := newHotPath(b, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.next(0, uint64(i))
		encode(b, h.acquires[0])
	}
}

// BenchmarkHotPath_EncodeBatch measures the leader encoding the acquires
// of hotBatch sessions as one entry (group commit).
func BenchmarkHotPath_EncodeBatch(b *testing.B) {
	h := newHotPath(b, hotBatch)
	b.ReportAllocs()
	for b.Loop() {
		encode(b, h.acquires...)
	}
}

// BenchmarkHotPath_DecodeAcquire measures a member decoding an entry of
// one acquire.
func BenchmarkHotPath_DecodeAcquire(b *testing.B) {
	h := newHotPath(b, 1)
	entry := encode(b, h.acquires[0])
	b.ReportAllocs()
	for b.Loop() {
		decode(b, entry)
	}
}

// BenchmarkHotPath_DecodeBatch measures a member decoding an entry of
// hotBatch acquires.
func BenchmarkHotPath_DecodeBatch(b *testing.B) {
	h := newHotPath(b, hotBatch)
	entry := encode(b, h.acquires...)
	b.ReportAllocs()
	for b.Loop() {
		decode(b, entry)
	}
}

// BenchmarkHotPath_ApplyAcquire measures applying an acquire that grants
// a free lock (the release that frees it again is not measured).
func BenchmarkHotPath_ApplyAcquire(b *testing.B) {
	h := newHotPath(b, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.next(0, uint64(i))
		h.apply(b, h.acquires[0])
		b.StopTimer()
		h.apply(b, h.releases[0])
		b.StartTimer()
	}
}

// BenchmarkHotPath_ApplyRelease measures applying a release of a held
// lock (the acquire before it is not measured).
func BenchmarkHotPath_ApplyRelease(b *testing.B) {
	h := newHotPath(b, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.next(0, uint64(i))
		b.StopTimer()
		h.apply(b, h.acquires[0])
		b.StartTimer()
		h.apply(b, h.releases[0])
	}
}

// BenchmarkHotPath_KeepAliveBatch measures the state machine's part of a
// keep-alive message renewing hotBatch sessions: the secret check of each
// (Machine.CheckOwner, under one read of the state). Renewals are not
// log commands; the server renews the session's deadline itself.
func BenchmarkHotPath_KeepAliveBatch(b *testing.B) {
	h := newHotPath(b, hotBatch)
	b.ReportAllocs()
	for b.Loop() {
		h.checkOwners(b)
	}
}

func (h *hotPath) checkOwners(tb testing.TB) {
	for _, r := range h.renewals {
		if err := h.m.CheckOwner(r.session, r.hash); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkHotPath_Cycle measures one whole lock cycle through the state
// machine as a member runs it: the acquire encoded, decoded and applied,
// then the release.
func BenchmarkHotPath_Cycle(b *testing.B) {
	h := newHotPath(b, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.next(0, uint64(i))
		h.cycle(b, h.acquires[:1], h.releases[:1])
	}
}

// BenchmarkHotPath_CycleBatch measures hotBatch sessions' lock cycles
// through the state machine, their acquires in one entry and their
// releases in another, per cycle.
func BenchmarkHotPath_CycleBatch(b *testing.B) {
	h := newHotPath(b, hotBatch)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for s := range hotBatch {
			h.next(s, uint64(i))
		}
		h.cycle(b, h.acquires, h.releases)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hotBatch), "ns/cycle")
}

// cycle encodes acquires as one entry, decodes and applies it, then does
// the same with releases.
func (h *hotPath) cycle(tb testing.TB, acquires, releases []*statev1.Command) {
	for _, c := range decode(tb, encode(tb, acquires...)) {
		h.apply(tb, c)
	}
	for _, c := range decode(tb, encode(tb, releases...)) {
		h.apply(tb, c)
	}
}
