package server

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/nativewire"
	"github.com/fenced-dev/fenced/internal/nettest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// gatedConn is one end of a real TCP connection whose Write calls are
// counted; while gate is set, the next Write waits until it is closed,
// and failNext makes the next Write fail as a broken connection's does.
type gatedConn struct {
	net.Conn
	writes   atomic.Int32
	entered  chan struct{} // told when a gated Write starts
	gate     chan struct{}
	failNext atomic.Bool
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	if g := c.gate; g != nil {
		c.gate = nil // only the writer goroutine reads or clears it
		c.entered <- struct{}{}
		<-g
	}
	if c.failNext.Load() {
		return 0, errors.New("write: broken pipe")
	}
	return c.Conn.Write(b)
}

// Frames written while another goroutine is in the connection's write
// wait for it without blocking their writers, and go out together in
// its next write, each intact and in the order written; a lone frame is
// written at once by its own writer. flushWait returns only once they
// are all sent.
func TestNativeWrite_CoalescesWhatIsReadyTogether(t *testing.T) {
	cc, sc := nettest.TCPPair(t)
	gc := &gatedConn{Conn: sc, entered: make(chan struct{}), gate: make(chan struct{})}
	nc := &nativeConn{c: gc}
	nc.wdone.L = &nc.wmu
	gate := gc.gate

	first := make(chan error, 1)
	go func() {
		first <- nc.write(nativewire.KindPipeline, 1, &fencedv1.PipelineResponse{Results: []*fencedv1.PipelineResult{{Id: 0}}})
	}()
	<-gc.entered // the first frame's writer is in its write
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	const queued = 20
	wrote := make(chan error, 1)
	go func() {
		// One after the other, so that the order they were written in is
		// known; each returns while the first writer is still held.
		for i := 1; i <= queued; i++ {
			if err := nc.write(nativewire.KindPipeline, uint32(1+i%3), &fencedv1.PipelineResponse{Results: []*fencedv1.PipelineResult{{Id: uint64(i)}}}); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the frames written during another's write waited for it")
	}
	var wg sync.WaitGroup
	flushed := make(chan struct{})
	wg.Go(func() { nc.flushWait(); close(flushed) })
	select {
	case <-flushed:
		t.Fatal("flushWait returned while the frames were still queued")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if n := gc.writes.Load(); n != 2 {
		t.Errorf("%d writes for 1 frame and %d queued behind it, want 2", n, queued)
	}

	r := bufio.NewReader(cc)
	for i := 0; i <= queued; i++ {
		f, err := nativewire.ReadFrame(r, 1<<20)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		var m fencedv1.PipelineResponse
		if err := proto.Unmarshal(f.Payload, &m); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if len(m.Results) != 1 || m.Results[0].Id != uint64(i) {
			t.Fatalf("frame %d carries %v, want the answer of call %d", i, &m, i)
		}
		if want := uint32(1 + i%3); i > 0 && f.Stream != want {
			t.Fatalf("frame %d on stream %d, want %d", i, f.Stream, want)
		}
	}

	// A lone frame: written by its own writer, at once.
	if err := nc.write(nativewire.KindPipeline, 1, &fencedv1.PipelineResponse{}); err != nil {
		t.Fatal(err)
	}
	if n := gc.writes.Load(); n != 3 {
		t.Errorf("%d writes after a lone frame, want 3", n)
	}
	if _, err := nativewire.ReadFrame(r, 1<<20); err != nil {
		t.Fatal(err)
	}
}

// A write that fails closes the connection, and every later write, also
// of a frame that was queued, reports the failure.
func TestNativeWrite_FailureClosesTheConnection(t *testing.T) {
	cc, sc := nettest.TCPPair(t)
	gc := &gatedConn{Conn: sc}
	nc := &nativeConn{c: gc}
	nc.wdone.L = &nc.wmu
	gc.failNext.Store(true)
	if err := nc.write(nativewire.KindPipeline, 1, &fencedv1.PipelineResponse{}); err == nil {
		t.Fatal("a failed write reported no error")
	}
	gc.failNext.Store(false)
	if err := nc.write(nativewire.KindPipeline, 1, &fencedv1.PipelineResponse{}); err == nil {
		t.Fatal("a write after a failed one reported no error")
	}
	_ = cc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := cc.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection stayed open after a failed write; the peer read a byte")
	}
	nc.flushWait() // returns: no writer is left
}
