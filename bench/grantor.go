package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Grantor is the System for any fence.Grantor (a library grantor on
// PostgreSQL or Redis, or the server through client.NewGrantor): each
// Lock is one Acquire with fence.Wait and the run's TTL, each Unlock the
// Release of that grant. The grantor's own renewals keep the grants.
type Grantor struct {
	name string
	g    fence.Grantor
	io.Closer
}

// NewGrantor returns the System for g, named name in results ("postgres",
// "redis"). closer, if not nil, is closed by Close (the grantor's
// connections).
func NewGrantor(name string, g fence.Grantor, closer io.Closer) *Grantor {
	return &Grantor{name: name, g: g, Closer: closer}
}

// Name implements System.
func (s *Grantor) Name() string { return s.name }

// NewLocker implements System.
func (s *Grantor) NewLocker(ctx context.Context, id int, ttl time.Duration) (Locker, error) {
	return &grantorLocker{g: s.g, ttl: ttl, held: map[string]fence.Held{}}, nil
}

// Close implements System.
func (s *Grantor) Close() error {
	if s.Closer == nil {
		return nil
	}
	return s.Closer.Close()
}

type grantorLocker struct {
	g    fence.Grantor
	ttl  time.Duration
	mu   sync.Mutex
	held map[string]fence.Held
}

// Lock implements Locker.
func (l *grantorLocker) Lock(ctx context.Context, name string) (uint64, error) {
	h, err := l.g.Acquire(ctx, name, fence.Wait(), fence.WithTTL(l.ttl))
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.held[name] = h
	l.mu.Unlock()
	return uint64(h.Grant().Token), nil
}

// Unlock implements Locker.
func (l *grantorLocker) Unlock(ctx context.Context, name string) error {
	l.mu.Lock()
	h := l.held[name]
	delete(l.held, name)
	l.mu.Unlock()
	if h == nil {
		return fmt.Errorf("bench: unlock %q: not held", name)
	}
	res, err := h.Release(ctx)
	if err == nil && res != fence.Released {
		err = fmt.Errorf("bench: release %q (token %d): %s", name, h.Grant().Token, res)
	}
	return err
}

// Close implements Locker: it releases what is still held.
func (l *grantorLocker) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for name, h := range l.held {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := h.Release(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		delete(l.held, name)
	}
	return errors.Join(errs...)
}
