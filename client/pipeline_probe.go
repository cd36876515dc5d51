package client

import (
	"context"
	"fmt"
	"time"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// probeTimeout bounds the probe of a pipeline stream that may be dead
// (suspect): a stream that brings nothing at all within it is given up.
const probeTimeout = time.Second

// silentSince reports whether nothing at all arrived on the stream since
// t.
func (st *pipeStream) silentSince(t time.Time) bool {
	return st.lastRecv.Load() < int64(t.Sub(st.opened))
}

// suspect handles a call whose deadline passed with nothing at all
// received on the stream since it was sent at sent: the connection may be
// silently dead (a partition does not reset it). A call that was alone on
// the stream gives it up at once, so that the next call opens a new one.
// With other calls in flight, which may be waiting silently on purpose (an
// acquire in a queue is answered when it is granted), giving the stream up
// would end them too: the server cancels a stream's calls when it ends,
// so each waiter would lose its place in its queue and be sent again at
// the back. The stream is probed instead, with a call every server answers
// at once and that changes nothing (a PipelineCall with no call:
// InvalidArgument), and given up only when nothing at all arrives within
// probeTimeout. One probe at a time per stream.
func (st *pipeStream) suspect(sent time.Time, alone bool) {
	if alone {
		st.giveUp(sent)
		return
	}
	if !st.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer st.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		st.call(ctx, &fencedv1.PipelineCall{}) // its answer is an error; any message will do
		if st.silentSince(sent) {
			st.giveUp(sent)
		}
	}()
}

// giveUp fails the stream, silent since sent, and closes its connection
// if nothing at all arrived on it either.
func (st *pipeStream) giveUp(sent time.Time) {
	err := fmt.Errorf("no answer on the pipeline stream for %v", time.Since(sent).Round(time.Millisecond))
	st.fail(err)
	abortConn(st.stream, err, sent)
}
