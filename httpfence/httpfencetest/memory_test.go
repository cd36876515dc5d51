package httpfencetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
)

// mapStore is a map of values, the store of the tests below.
type mapStore struct {
	mu     sync.Mutex
	values map[string]string
}

func (m *mapStore) write(_ context.Context, object string, _ fence.Token, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.values == nil {
		m.values = map[string]string{}
	}
	m.values[object] = value
	return nil
}

func (m *mapStore) read(_ context.Context, object string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[object], nil
}

// TestMemory_HTTP serves a map behind a guard.Memory.
func TestMemory_HTTP(t *testing.T) {
	var marks guard.Memory
	var m mapStore
	httpfencetest.Run(t, httpfencetest.Resource{Guard: &marks, Write: m.write, Read: m.read})
}

// TestRun_CatchesAnUnfencedGuard runs the suite against a guard that
// checks nothing, in a child process of this test binary: the suite must
// fail there, or it proves nothing.
func TestRun_CatchesAnUnfencedGuard(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnfencedGuard$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HTTPFENCETEST_UNFENCED=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the suite passed a guard that accepts stale tokens (err %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "want 409") {
		t.Fatalf("the suite failed for another reason than the stale write:\n%s", out)
	}
}

// TestUnfencedGuard is the child of TestRun_CatchesAnUnfencedGuard; it
// runs only there.
func TestUnfencedGuard(t *testing.T) {
	if os.Getenv("HTTPFENCETEST_UNFENCED") == "" {
		t.Skip("run by TestRun_CatchesAnUnfencedGuard")
	}
	unfenced := fence.GuardFunc(func(ctx context.Context, object string, tok fence.Token, apply func(context.Context) error) error {
		if err := fence.ValidateToken(tok); err != nil {
			return err
		}
		return apply(ctx)
	})
	var m mapStore
	httpfencetest.Run(t, httpfencetest.Resource{Guard: unfenced, Write: m.write, Read: m.read})
}
