package fsm_test

import (
	"testing"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// BenchmarkUnknownIn measures the walk that refuses fields this build
// does not know, on what a lock cycle walks: the server walks each
// client call (and, when it carries unknown bytes, the Pipeline message),
// and the leader each command it proposes.
func BenchmarkUnknownIn(b *testing.B) {
	call := &fencedv1.PipelineCall{Id: 7, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{
		Name: "bench/lock/1", Session: 42, Seq: 3, WaitMs: 5000, RequestId: "r1", Secret: "s3cr3t",
	}}}
	h := newHotPath(b, 1)
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			if fsm.UnknownIn(call) != "" {
				b.Fatal("unknown field")
			}
		}
	})
	b.Run("command", func(b *testing.B) {
		var cmd *statev1.Command = h.acquires[0]
		for b.Loop() {
			if fsm.UnknownIn(cmd) != "" {
				b.Fatal("unknown field")
			}
		}
	})
}
