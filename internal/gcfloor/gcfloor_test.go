package gcfloor_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/gcfloor"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, roots, floor uint64
		want               int
	}{
		{10 * mib, 0, 64 * mib, 540},       // goal 10 + 10 × 5.4 = 64 MiB
		{10 * mib, 2 * mib, 64 * mib, 450}, // 10 + 12 × 4.5 = 64 MiB
		{32 * mib, 0, 64 * mib, 100},       // twice the live heap reaches the floor
		{30 * mib, 4 * mib, 64 * mib, 100}, // and with the roots
		{500 * mib, 0, 64 * mib, 100},
		{0, 0, 64 * mib, 1500}, // an empty heap counts as 4 MiB: the goal before the first collection is 4 MiB × GOGC/100
		{10 * mib, 0, 0, 100},
	} {
		if got := gcfloor.Percent(c.live, c.roots, c.floor); got != c.want {
			t.Errorf("Percent(%d MiB live, %d MiB roots, %d MiB floor) = %d, want %d", c.live/mib, c.roots/mib, c.floor/mib, got, c.want)
		}
	}
}

var sink []byte

// collections counts the collections while 256 MiB of garbage is made in
// 4 KiB pieces.
func collections() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	runtime.GC()
	metrics.Read(s)
	before := s[0].Value.Uint64()
	for range 256 << 8 {
		sink = make([]byte, 4<<10)
	}
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// TestStart_FewerCollectionsOnASmallHeap makes the same garbage with the
// tuner and without it: with a 64 MiB floor and little live, the collector
// runs several times less often, and stopping puts GOGC back to 100.
func TestStart_FewerCollectionsOnASmallHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	without := collections()
	stop := gcfloor.Start(64 << 20)
	with := collections()
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after stop = %d, want 100", got)
	}
	t.Logf("collections making 256 MiB of garbage: %d without the floor, %d with it", without, with)
	if with*4 > without {
		t.Errorf("with a 64 MiB floor the collector ran %d times, without %d: want at most a quarter", with, without)
	}
}

// gogc is the GOGC the runtime runs with now.
func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestStart_GrowingLiveHeapGoesBackTo100 starts the tuner on a small heap,
// then holds 48 MiB live, more than half of the 64 MiB floor: GOGC falls
// back to 100 after the next collections, so a large heap's goal stays
// twice its live size.
func TestStart_GrowingLiveHeapGoesBackTo100(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := gcfloor.Start(64 << 20)
	defer stop()
	collections()
	if got := gogc(); got <= 100 {
		t.Fatalf("GOGC on a small heap with a 64 MiB floor = %d, want above 100", got)
	}
	live := make([][]byte, 48)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	// The tuner runs on the finalizer goroutine after each collection.
	deadline := time.Now().Add(5 * time.Second)
	for gogc() != 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(); got != 100 {
		t.Errorf("GOGC with 48 MiB live and a 64 MiB floor = %d after 5 s of collections, want 100", got)
	}
	runtime.KeepAlive(live)
}
