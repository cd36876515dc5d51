package fsm_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// BenchmarkMachine_AcquireRelease measures one acquire and one release
// applied to the state machine (no Raft, no encoding).
func BenchmarkMachine_AcquireRelease(b *testing.B) {
	m := fsm.New(nil)
	m.Apply(initCommand(0))
	s := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
	acq := &statev1.Acquire{Session: s, Name: "bench"}
	rel := &statev1.Release{Session: s, Name: "bench"}
	acqCmd := &statev1.Command{Op: &statev1.Command_Acquire{Acquire: acq}}
	relCmd := &statev1.Command{Op: &statev1.Command_Release{Release: rel}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		acq.Seq, rel.Seq = uint64(2*i+1), uint64(2*i+2)
		if !m.Apply(acqCmd).Granted {
			b.Fatal("not granted")
		}
		m.Apply(relCmd)
	}
}

// BenchmarkMachine_DecodeApply adds decoding the command from its log bytes.
func BenchmarkMachine_DecodeApply(b *testing.B) {
	m := fsm.New(nil)
	m.Apply(initCommand(0))
	s := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		raw, _ := fsm.Encode(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: uint64(2*i + 1), Name: "bench"}}})
		cmd, err := fsm.Decode(raw)
		if err != nil || !m.Apply(cmd).Granted {
			b.Fatal("not granted")
		}
		m.Apply(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: s, Seq: uint64(2*i + 2), Name: "bench"}}})
	}
}

// BenchmarkMachine_AcquireReleaseAmongHolders measures an acquire and a
// release while many other sessions hold locks of their own, so that the
// state machine's maps are the size a large deployment has. It also
// reports the heap the holders take, per holder (a session and its lock).
func BenchmarkMachine_AcquireReleaseAmongHolders(b *testing.B) {
	for _, holders := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("holders=%d", holders), func(b *testing.B) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m := fsm.New(nil)
			m.Apply(initCommand(0))
			for i := range holders {
				s := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
				if !m.Apply(&statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: s, Seq: 1, Name: fmt.Sprintf("holder/%d", i)}}}).Granted {
					b.Fatal("not granted")
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perHolder := float64(after.HeapAlloc-before.HeapAlloc) / float64(holders)

			s := m.Apply(&statev1.Command{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 10000}}}).Session
			acq := &statev1.Acquire{Session: s, Name: "bench"}
			rel := &statev1.Release{Session: s, Name: "bench"}
			acqCmd := &statev1.Command{Op: &statev1.Command_Acquire{Acquire: acq}}
			relCmd := &statev1.Command{Op: &statev1.Command_Release{Release: rel}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				acq.Seq, rel.Seq = uint64(2*i+1), uint64(2*i+2)
				if !m.Apply(acqCmd).Granted {
					b.Fatal("not granted")
				}
				m.Apply(relCmd)
			}
			b.ReportMetric(perHolder, "heap-bytes/holder")
		})
	}
}
