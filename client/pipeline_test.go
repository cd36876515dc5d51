package client

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Calls are packed into messages under the size budget, in order, and a
// call larger than the budget goes alone.
func TestPipelineMessages_PacksUnderBudget(t *testing.T) {
	var calls []*fencedv1.PipelineCall
	for i := range 300 {
		calls = append(calls, &fencedv1.PipelineCall{Id: uint64(i + 1), Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: strings.Repeat("n", 500), Session: 7, Seq: uint64(i)}}})
	}
	big := &fencedv1.PipelineCall{Id: 301, Call: &fencedv1.PipelineCall_KvPut{KvPut: &fencedv1.KVPutRequest{Key: "k", Value: make([]byte, 200<<10), Token: 1}}}
	calls = append(calls, big)
	msgs := pipelineMessages(calls, []uint64{9, 10})
	if len(msgs) < 2 {
		t.Fatalf("%d messages for ~350 KiB of calls, want several", len(msgs))
	}
	var next uint64 = 1
	for i, m := range msgs {
		if i == 0 && len(m.Cancel) != 2 || i > 0 && len(m.Cancel) != 0 {
			t.Fatalf("message %d carries cancels %v; want both in the first only", i, m.Cancel)
		}
		if proto.Size(m) > maxPipelineMessageBytes && len(m.Calls) != 1 {
			t.Fatalf("message %d is %d bytes with %d calls; only a single big call may exceed %d", i, proto.Size(m), len(m.Calls), maxPipelineMessageBytes)
		}
		for _, c := range m.Calls {
			if c.Id != next {
				t.Fatalf("call %d out of order (want %d)", c.Id, next)
			}
			next++
		}
	}
	if next != 302 {
		t.Fatalf("%d calls packed, want 301", next-1)
	}
	if got := pipelineMessages(nil, nil); len(got) != 0 {
		t.Fatalf("nothing to send produced %d messages", len(got))
	}
}
