package bounded_test

import (
	"sync"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/bounded"
)

// fatalRecorder is a testing.TB whose Fatalf records the failure and ends
// the goroutine, as testing.T's does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.failed = true
	panic(r)
}

// run calls f with a recorder and reports whether f failed it.
func run(f func(testing.TB)) (failed bool) {
	r := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil && v != r {
				panic(v)
			}
		}()
		f(r)
	}()
	<-done // f ends either way: it returns or its wait fails within 50ms
	return r.failed
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if failed := run(func(tb testing.TB) {
		if v := bounded.Recv(tb, "value", 50*time.Millisecond, ch); v != 7 {
			t.Errorf("Recv = %d, want 7", v)
		}
	}); failed {
		t.Error("Recv of a sent value failed")
	}
	if failed := run(func(tb testing.TB) { bounded.Recv(tb, "nothing", 50*time.Millisecond, make(chan int)) }); !failed {
		t.Error("Recv of a channel nobody sends on did not fail")
	}
}

func TestWait(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { time.Sleep(10 * time.Millisecond); wg.Done() }()
	if failed := run(func(tb testing.TB) { bounded.Wait(tb, "done", time.Minute, &wg) }); failed {
		t.Error("Wait for a group that finishes failed")
	}
	var stuck sync.WaitGroup
	stuck.Add(1)
	if failed := run(func(tb testing.TB) { bounded.Wait(tb, "stuck", 50*time.Millisecond, &stuck) }); !failed {
		t.Error("Wait for a group that never finishes did not fail")
	}
	stuck.Done()
}
