package guard

import (
	"context"
	"sync"

	fence "github.com/fenced-dev/fenced"
)

// Memory is an in-memory fence.Guard: per-object watermarks in a map under
// one mutex. Its watermarks are lost when the process exits, so it
// protects only resources that live in the same process (and tests). Its
// zero value is ready to use. It is not pinned to an issuer and accepts
// every object, "" included.
type Memory struct {
	mu    sync.Mutex
	marks map[string]fence.Token
}

var _ fence.Guard = (*Memory)(nil)

// Check applies the watermark rule to object and raises its watermark when
// t is accepted: Do without an apply.
func (m *Memory) Check(ctx context.Context, object string, t fence.Token) error {
	return m.Do(ctx, object, t, nil)
}

// Do implements fence.Guard: it checks t for object and, when accepted,
// runs apply with ctx while still holding the guard's lock, so the check,
// the write and the raise of the watermark are one atomic step. If apply
// fails the watermark is left unchanged and Do returns apply's error.
//
// The lock is one for all objects: calls of Do for different objects also
// run one at a time, which matters when apply is long (a whole handler, in
// AroundHandler mode). Do waits for the lock even when ctx is cancelled;
// it hands ctx to apply, which should stop when ctx is done.
func (m *Memory) Do(ctx context.Context, object string, t fence.Token, apply func(ctx context.Context) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := fence.Decide(object, m.marks[object], t)
	if err != nil {
		return err
	}
	if apply != nil {
		if err := apply(ctx); err != nil {
			return err
		}
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
