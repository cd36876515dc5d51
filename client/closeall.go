package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	fence "github.com/fenced-dev/fenced"
)

// closeConcurrency bounds the CloseSession calls Client.Close makes at
// once: a Client with a hundred thousand sessions must not start a
// goroutine and a connection attempt for each when it closes, least of
// all when the servers are gone.
const closeConcurrency = 32

// closeRemoteAll asks the server to close sessions, as Client.Close does,
// with at most closeConcurrency calls at once and all of them within one
// request timeout; those it has not closed by then are left to the server,
// which expires each when its TTL runs out. It logs one line for the
// sessions it could not close.
func (c *Client) closeRemoteAll(sessions []*Session) {
	if len(sessions) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.requestTimeout)
	defer cancel()
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(len(sessions), closeConcurrency) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(sessions); i = int(next.Add(1)) - 1 {
				err := ctx.Err()
				if err == nil {
					err = c.closeRemote(ctx, sessions[i].id, sessions[i].secret)
				}
				if err != nil && !errors.Is(err, fence.ErrSessionNotFound) {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		c.log.Info("fenced: could not close sessions at Close; the server expires them", "sessions", n, "of", len(sessions), "err", firstErr)
	}
}
