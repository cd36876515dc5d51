package nativewire

import (
	"bufio"
	"bytes"
	"testing"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Allocation budgets of the frame layer, on the path of every call of
// the native protocol: a connection reads each frame into one reused
// buffer and encodes each answer into one reused buffer, so neither
// allocates per frame. Counted, not timed (testing.AllocsPerRun), so they
// hold on a loaded machine and under -race; a change that allocates here
// fails, naming the step.
func TestAllocBudget_Frames(t *testing.T) {
	m := &fencedv1.PipelineRequest{Calls: []*fencedv1.PipelineCall{{Id: 7, Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "bench/lock-1", Session: 42, Seq: 1234}}}}}
	frame, err := AppendFrame(nil, KindPipeline, 3, m)
	if err != nil {
		t.Fatal(err)
	}
	const frames = 64
	stream := bytes.Repeat(frame, frames)
	src := bytes.NewReader(stream)
	r := bufio.NewReaderSize(src, 4096)
	buf := make([]byte, 0, 1024)
	var read int
	got := testing.AllocsPerRun(200, func() {
		if read == frames {
			src.Reset(stream)
			r.Reset(src)
			read = 0
		}
		f, err := ReadFrameBuffer(r, 1024, buf)
		if err != nil || f.Kind != KindPipeline || f.Stream != 3 || len(f.Payload) != len(frame)-HeaderLen {
			t.Fatalf("frame %d: %+v, %v", read, f, err)
		}
		read++
	})
	if got > 0 {
		t.Errorf("ReadFrameBuffer into a buffer that holds the frame: %.1f allocations a frame, budget 0", got)
	}

	out := make([]byte, 0, 1024)
	got = testing.AllocsPerRun(200, func() {
		b, err := AppendFrame(out[:0], KindPipeline, 3, m)
		if err != nil || len(b) != len(frame) {
			t.Fatalf("AppendFrame: %d bytes, %v", len(b), err)
		}
	})
	if got > 0 {
		t.Errorf("AppendFrame into a buffer with room: %.1f allocations a frame, budget 0", got)
	}

	// The negative control: without a buffer a frame costs its header and
	// payload, so the counts above measure what they claim to.
	src.Reset(stream)
	r.Reset(src)
	if got := testing.AllocsPerRun(20, func() {
		if _, err := ReadFrame(r, 1024); err != nil {
			t.Fatal(err)
		}
	}); got < 1 {
		t.Errorf("ReadFrame without a buffer: %.1f allocations a frame, want at least 1 (the count is not counting)", got)
	}
}
