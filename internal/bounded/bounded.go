// Package bounded gives tests blocking waits that end: a wait that does not
// finish in time fails its test at once, instead of hanging the whole
// package until the test binary's -timeout and losing every other result.
package bounded

import (
	"sync"
	"testing"
	"time"
)

// Recv receives one value from ch and returns it, failing t if none comes
// (and ch is not closed) within d.
func Recv[T any](t testing.TB, what string, d time.Duration, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, d)
		panic("unreachable")
	}
}

// Wait waits for wg, failing t if its counter does not reach zero within
// d. The goroutines it waits for are left running then.
func Wait(t testing.TB, what string, d time.Duration, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Recv(t, what, d, done)
}
