package guardtest_test

import (
	"context"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
)

// memoryTarget stores values next to a guard.Memory, appending under the
// guard's lock.
type memoryTarget struct {
	g      guard.Memory
	mu     sync.Mutex
	values map[string]string
}

func (m *memoryTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return m.g.Do(ctx, object, t, func(context.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.values[object] != "" {
			value = m.values[object] + "," + value
		}
		m.values[object] = value
		return nil
	})
}

func (m *memoryTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[object], m.g.Watermark(object), nil
}

func (m *memoryTarget) Appends() bool { return true }

func TestMemory_Conformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T) guardtest.Target {
		return &memoryTarget{values: map[string]string{}}
	})
}

func TestMemory_Guard(t *testing.T) {
	var g guard.Memory
	guardtest.RunGuard(t, guardtest.Guard{
		Guard:     &g,
		Watermark: func(_ context.Context, object string) (fence.Token, error) { return g.Watermark(object), nil },
	})
}

func TestMemory_Signed(t *testing.T) {
	var g guard.Memory
	guardtest.RunSigned(t, guardtest.Guard{Guard: &g, Watermark: func(_ context.Context, object string) (fence.Token, error) {
		return g.Watermark(object), nil
	}})
}
