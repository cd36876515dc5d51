package main_test

import (
	"os"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestServe_GCHeapFloor: a server raises GOGC above 100 while its heap is
// small (--gc-heap-floor-mib 64 by default), leaves it at 100 with the
// floor off, and leaves a GOGC of the environment alone, saying so in its
// log. The runtime's own figure (go_gc_gogc_percent on /metrics) is read.
func TestServe_GCHeapFloor(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Skipf("GOGC=%s in the test's environment: every server would inherit it", v)
	}
	def := proctest.StartServer(t)
	if got := metricValue(t, def.Addr, "go_gc_gogc_percent"); got <= 100 {
		t.Errorf("GOGC of a fresh server with the default floor = %v, want above 100", got)
	}
	off := proctest.StartServer(t, "--gc-heap-floor-mib", "0")
	if got := metricValue(t, off.Addr, "go_gc_gogc_percent"); got != 100 {
		t.Errorf("GOGC with --gc-heap-floor-mib 0 = %v, want 100", got)
	}
	addrs := proctest.FreeAddrs(t, 2)
	env := &proctest.Server{Addr: addrs[0], PeerAddr: addrs[1], DataDir: t.TempDir(), Env: []string{"GOGC=150"}}
	env.Init(t)
	env.Start()
	t.Cleanup(env.Kill)
	if got := metricValue(t, env.Addr, "go_gc_gogc_percent"); got != 150 {
		t.Errorf("GOGC with GOGC=150 in the environment = %v, want 150", got)
	}
	if !strings.Contains(env.Log(), "--gc-heap-floor-mib is ignored") {
		t.Errorf("the log does not say the floor is ignored under GOGC=150:\n%s", env.Log())
	}
}
