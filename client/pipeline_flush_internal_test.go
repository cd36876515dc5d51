package client

import (
	"context"
	"sync"
	"testing"
	"time"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// fakeDirectPipe is a direct (native-like) Pipeline stream that records
// the call ids of each message sent and answers every call at once; the
// first Send waits for hold to close when hold is set.
type fakeDirectPipe struct {
	st   *pipeStream
	hold chan struct{}

	mu    sync.Mutex
	sends [][]uint64
}

func (f *fakeDirectPipe) Send(m *fencedv1.PipelineRequest) error {
	var ids []uint64
	for _, c := range m.Calls {
		ids = append(ids, c.Id)
	}
	f.mu.Lock()
	f.sends = append(f.sends, ids)
	first := len(f.sends) == 1
	f.mu.Unlock()
	if first && f.hold != nil {
		<-f.hold
	}
	resp := &fencedv1.PipelineResponse{}
	for _, id := range ids {
		resp.Results = append(resp.Results, &fencedv1.PipelineResult{Id: id})
	}
	f.st.received(resp)
	return nil
}

func (f *fakeDirectPipe) Receive() (*fencedv1.PipelineResponse, error) { select {} }
func (f *fakeDirectPipe) CloseRequest() error                          { return nil }
func (f *fakeDirectPipe) CloseResponse() error                         { return nil }
func (f *fakeDirectPipe) direct() bool                                 { return true }

// newDirectTestStream returns a pipeStream on f that has sent its first
// message, with no send goroutine: a call that is not sent by a caller is
// never sent.
func newDirectTestStream(f *fakeDirectPipe) *pipeStream {
	st := &pipeStream{
		p:       &pipeline{},
		stream:  &lazyStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse]{open: func() clientStream[fencedv1.PipelineRequest, fencedv1.PipelineResponse] { return f }},
		opened:  time.Now(),
		cancel:  func() {},
		signal:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		waiting: make(map[uint64]waiter),
	}
	f.st = st
	st.stream.get()
	st.direct.Store(st.stream.direct())
	return st
}

// On a direct stream a lone call sends itself (no goroutine in between,
// so no hand-off and no wait for one), and the calls made while a send
// is under way go out together in the sender's next message.
func TestPipeStream_CallsSendThemselvesAndCoalesce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(st *pipeStream) error {
		_, err := st.call(ctx, &fencedv1.PipelineCall{Call: &fencedv1.PipelineCall_Release{Release: &fencedv1.ReleaseRequest{Name: "x"}}})
		return err
	}

	lone := &fakeDirectPipe{}
	st := newDirectTestStream(lone)
	if !st.direct.Load() {
		t.Fatal("the stream is not direct")
	}
	for range 3 {
		if err := call(st); err != nil {
			t.Fatalf("a lone call was not sent by its caller: %v", err)
		}
	}
	if len(lone.sends) != 3 {
		t.Fatalf("messages %v, want one a call", lone.sends)
	}

	burst := &fakeDirectPipe{hold: make(chan struct{})}
	st = newDirectTestStream(burst)
	errs := make(chan error, 11)
	go func() { errs <- call(st) }() // its Send is held
	for burst.sent() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		go func() { errs <- call(st) }()
	}
	for {
		st.mu.Lock()
		n := len(st.calls)
		st.mu.Unlock()
		if n == 10 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(burst.hold)
	for range 11 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(burst.sends) != 2 || len(burst.sends[0]) != 1 || len(burst.sends[1]) != 10 {
		t.Fatalf("messages %v, want the first call alone and the 10 queued meanwhile in one", burst.sends)
	}
}

func (f *fakeDirectPipe) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sends)
}
