package fsm_test

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/internal/heapcost"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// holdersMachine returns a machine with n sessions, each created as the
// SDK creates one (a request id and a secret's hash) and holding a lock of
// its own.
func holdersMachine(tb testing.TB, n int) *fsm.Machine {
	m := fsm.New(nil)
	m.Apply(initCommand(0))
	for i := range n {
		hash := sha256.Sum256([]byte(fmt.Sprint(i)))
		s := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 60000, RequestId: fmt.Sprintf("req-%016x", i), SecretHash: hash[:]}}}).Session
		if !m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 1, Name: fmt.Sprintf("bench/sessions/0123abcd/%d", i), SecretHash: hash[:]}}}).Granted {
			tb.Fatal("not granted")
		}
	}
	return m
}

// BenchmarkMachine_Snapshot and BenchmarkMachine_Restore measure encoding
// and restoring the state of 100k holders (docs/benchmarks.md, "The cost
// of scale": a restart restores the newest snapshot, a new member installs
// one).
func BenchmarkMachine_Snapshot(b *testing.B) {
	m := holdersMachine(b, 100000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMachine_Restore(b *testing.B) {
	snap, err := holdersMachine(b, 100000).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	m := fsm.New(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(snap)))
	for b.Loop() {
		if err := m.Restore(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMachine_RestoreMillion restores the state of a million
// holders (the million-session row of docs/benchmarks.md, "The cost of
// scale"; building it takes a minute) and reports the process's CPU time
// per restore beside the wall time, which a shared machine stretches.
func BenchmarkMachine_RestoreMillion(b *testing.B) {
	snap, err := holdersMachine(b, 1000000).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.SetBytes(int64(len(snap)))
	var cpu time.Duration
	for b.Loop() {
		m := fsm.New(nil)
		c0 := processCPU()
		if err := m.Restore(snap); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - c0
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkMachine_RestoreKnownFields measures the part of Restore that
// looks for a field or enum value this build does not know in the state
// of 100k holders (format.go), to set beside BenchmarkMachine_Restore.
func BenchmarkMachine_RestoreKnownFields(b *testing.B) {
	snap, err := holdersMachine(b, 100000).Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var st statev1.State
	if err := proto.Unmarshal(snap, &st); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(snap)))
	for b.Loop() {
		if where := fsm.UnknownIn(&st); where != "" {
			b.Fatal(where)
		}
	}
}

// BenchmarkMachine_HeapPerHolder reports the Go heap a holder (a session
// holding a lock of its own) keeps live in the state machine, over 100k
// holders, after a collection: the state machine's part of the server's
// memory per session (docs/benchmarks.md, "The cost of scale").
func BenchmarkMachine_HeapPerHolder(b *testing.B) {
	const n = 100000
	var per float64
	for b.Loop() {
		per = heapcost.PerItem(n, func() any { return holdersMachine(b, n) })
	}
	b.ReportMetric(per, "heap-B/holder")
}
