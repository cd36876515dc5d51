package server_test

import (
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/nativewire"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// nativeCycleAllocBudget is the most heap allocations one lock cycle
// (acquire → grant → release) over a native Pipeline stream may make in
// a process holding both the server and a raw client (its frame reads
// and decodes, a few allocations): the server's reader, the call's
// worker, the proposal, the Raft log's append and the apply, the grant's
// signing and the answers. Measured 198.1–198.2 in repeated runs when it
// was set (203.1 before the reader decoded Pipeline frames from a reused
// buffer), 186.0 once a claim's answer reused its grant and the server's
// events were built once per command, 176.2 once a proposal's timeout
// took no context and timer of its own and its proposal was reused
// (raftstore's ProposeWithin), 170.1 once the Pipeline called the lock
// handlers without Connect's envelopes and reused its batch of answers
// and their message, plus 2; the race detector's sync.Pool
// drops some of what is put back, which costs 7 more (raceAllocs).
// Counted, not timed, so it holds on a loaded machine; a change that
// allocates more per call fails here (docs/contributing.md, "Allocation
// budgets"), and one that cuts allocations lowers it.
const nativeCycleAllocBudget = 168 + raceAllocs

// TestAllocBudget_NativeCycle runs lock cycles one after the other on one
// native stream, as one of many independent clients does, and counts the
// process's heap allocations per cycle against nativeCycleAllocBudget.
func TestAllocBudget_NativeCycle(t *testing.T) {
	srv := testserver.Start(t)
	api := asIdentity(srv.Addr(), "")
	session, secret := api.session(t)
	n, w := dialNative(t, srv.Addr(), "")
	if w.Code != 0 {
		t.Fatalf("welcome %v", w)
	}
	var buf []byte
	seq := uint64(0)
	announced := false
	call := func(c *fencedv1.PipelineCall) *fencedv1.PipelineResult {
		var err error
		if buf, err = nativewire.AppendFrame(buf[:0], nativewire.KindPipeline, 1, &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{c}}); err != nil {
			t.Fatal(err)
		}
		n.raw(buf)
		for {
			f, err := n.read()
			if err != nil {
				t.Fatal(err)
			}
			var resp fencedv1.PipelineResponse
			if err := proto.Unmarshal(f.Payload, &resp); err != nil {
				t.Fatal(err)
			}
			if !announced && len(resp.Results) == 0 && len(resp.Calls) > 0 {
				announced = true // the stream's first response: the calls it takes
				continue
			}
			if len(resp.Results) != 1 {
				t.Fatalf("answer %v, want one result", &resp)
			}
			return resp.Results[0]
		}
	}
	cycle := func() {
		seq++
		r := call(&fencedv1.PipelineCall{Id: 1, Call: &fencedv1.PipelineCall_Acquire{Acquire: &fencedv1.AcquireRequest{Name: "alloc/lock", Session: session, Seq: seq, Secret: secret}}})
		if !r.GetAcquire().GetGranted() {
			t.Fatalf("acquire %d: %v", seq, r)
		}
		seq++
		r = call(&fencedv1.PipelineCall{Id: 2, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "alloc/lock", Session: session, Seq: seq, Secret: secret}}})
		if r.GetRelease() == nil {
			t.Fatalf("release %d: %v", seq, r)
		}
	}
	for range 50 { // the workers, buffers and log cache grow to their size
		cycle()
	}
	// The fewest of three counts: what the server does beside the cycles
	// (its timers' work, more of it per cycle on a slow machine) only adds.
	const cycles = 200
	got := 0.0
	for i := range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range cycles {
			cycle()
		}
		runtime.ReadMemStats(&after)
		if n := float64(after.Mallocs-before.Mallocs) / cycles; i == 0 || n < got {
			got = n
		}
	}
	if got > nativeCycleAllocBudget {
		t.Errorf("%.1f allocations a native lock cycle, budget %d (see nativeCycleAllocBudget to update it)", got, nativeCycleAllocBudget)
	} else {
		t.Logf("%.1f allocations a native lock cycle, budget %d", got, nativeCycleAllocBudget)
	}
}
