package guard

import (
	"context"
	"sync"

	fence "github.com/fenced-dev/fenced"
)

// Memory is an in-memory fence.Guard: per-object watermarks in a map under
// a mutex. Its watermarks are lost when the process exits, so it protects
// only resources that live in the same process (and tests). Its zero value
// is ready to use.
type Memory struct {
	mu    sync.Mutex
	marks map[string]fence.Token
}

var _ fence.Guard = (*Memory)(nil)

// Check implements fence.Guard.
func (m *Memory) Check(ctx context.Context, object string, t fence.Token) error {
	return m.Do(object, t, func() error { return nil })
}

// Do checks t for object and, when accepted, runs apply while still holding
// the guard's lock, so the check, the write and the raise of the watermark
// are one atomic step. If apply fails the watermark is left unchanged.
func (m *Memory) Do(object string, t fence.Token, apply func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := Decide(object, m.marks[object], t)
	if err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	if m.marks == nil {
		m.marks = make(map[string]fence.Token)
	}
	m.marks[object] = next
	return nil
}

// Watermark returns the highest token accepted for object, 0 if none.
func (m *Memory) Watermark(object string) fence.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[object]
}
