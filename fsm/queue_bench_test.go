package fsm_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// BenchmarkQueue_BatchCycle measures what every member applies per item
// of `fenced bench --workload queue --clients 64 --batch 16`: 64 workers
// on one queue, each pushing 16 items (each with its own dedupe key, as
// the SDK gives them) and then claiming up to 16 with the acks of its
// previous claim in the same command. One op is one worker's cycle.
func BenchmarkQueue_BatchCycle(b *testing.B) {
	const workers, batch = 64, 16
	m := fsm.New(nil)
	m.Apply(initCommand(0))
	sessions := make([]uint64, workers)
	held := make([][]*statev1.QueueItemToken, workers)
	for i := range sessions {
		res := m.Apply(&statev1.Command{NowUnixMs: 1, Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 86400000, Quota: hotQuota()}}})
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		sessions[i] = res.Session
	}
	payload := make([]byte, 64)
	var key, seq uint64
	cycle := func(w int, now int64) {
		pushes := make([]*statev1.QueuePush, batch)
		for j := range pushes {
			key++
			pushes[j] = &statev1.QueuePush{Queue: "bench/q", Payload: payload, DedupeKey: fmt.Sprintf("sdk-%016x", key), DedupeWindow: 10000}
		}
		if res := m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: pushes}}}); res.Err != nil {
			b.Fatal(res.Err)
		}
		seq++
		res := m.Apply(&statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{
			Session: sessions[w], Seq: seq, Queue: "bench/q", VisibilityMs: 30000, MaxItems: batch, Acks: held[w], Quota: hotQuota(),
		}}})
		if res.Err != nil || !res.Granted {
			b.Fatalf("claim: granted %v, %v", res.Granted, res.Err)
		}
		held[w] = held[w][:0:0]
		for _, c := range res.Queue.Claims {
			held[w] = append(held[w], &statev1.QueueItemToken{Item: c.Item, Token: uint64(c.Grant.Token)})
		}
	}
	for w := range workers { // every worker holds a batch, as in the run
		cycle(w, 2)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		cycle(i%workers, 3+int64(i/1000))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/item")
	// The process's CPU time (the collector's included) per item: on a
	// shared machine a steadier figure than the wall clock.
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/item")
}

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
