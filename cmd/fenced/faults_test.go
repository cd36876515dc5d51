package main_test

import (
	"strings"
	"testing"
	"time"
)

// A production build has no fault flags and refuses the dial hook's
// variable, so that no fault can be turned on in it.
func TestServe_ProductionBuildHasNoFaults(t *testing.T) {
	for _, flag := range []string{"--test-unfenced-kv", "--test-unscoped-kv", "--test-reset-tokens", "--test-clock-rate=2"} {
		_, stderr, code := runFenced(t, "serve", "--data-dir", t.TempDir(), flag)
		if code != 2 || !strings.Contains(stderr, "unknown flag") {
			t.Errorf("serve %s: exit %d, stderr %q; want exit 2, unknown flag", flag, code, stderr)
		}
	}
	f := startFenced(t, []string{"FENCED_TEST_DIAL_VIA=127.0.0.1:1=127.0.0.1:2"}, "serve", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0")
	if code := f.wait(t, 30*time.Second); code != 2 || !strings.Contains(f.stderr.String(), "-tags fencedfaults") {
		t.Fatalf("serve with %s: exit %d, stderr %q; want exit 2 naming the build tag", "FENCED_TEST_DIAL_VIA", code, f.stderr.String())
	}
}
