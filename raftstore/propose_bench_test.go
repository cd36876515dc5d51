package raftstore_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

// benchLeader opens a one-node cluster for a benchmark and waits until
// it leads; the context bounds the benchmark's proposals.
func benchLeader(b *testing.B) (*raftstore.Node, context.Context) {
	n := open(b, testConfig(b, b.TempDir()), &counter{})
	waitLeader(b, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	b.ReportAllocs()
	return n, ctx
}

// BenchmarkNode_Propose measures one command proposed, committed (the log
// fsynced) and applied on a one-node cluster, and what it allocates in
// raftstore and hashicorp/raft; the state machine is the tests' counter.
func BenchmarkNode_Propose(b *testing.B) {
	n, ctx := benchLeader(b)
	for b.Loop() {
		if _, err := n.Propose(ctx, "inc"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNode_ProposeParallel measures 64 proposers proposing at once,
// as 64 independent clients do: their commands share entries (group
// commit). Per op is one command.
func BenchmarkNode_ProposeParallel(b *testing.B) {
	n, ctx := benchLeader(b)
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Propose(ctx, "inc"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
