package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// Fenced is the System for a fenced cluster, used as its SDK recommends:
// one client.Client (one HTTP/2 connection, one keep-alive stream for all
// sessions) shared by every locker, unless more connections are asked for.
type Fenced struct {
	clients []*client.Client
}

// NewFenced returns the System for the fenced cluster at endpoints
// (host:port of its members), spreading lockers over connections clients
// (1 is what an application would use), each made with opts (TLS, for
// instance).
func NewFenced(endpoints []string, connections int, opts ...client.Option) (*Fenced, error) {
	if connections < 1 || connections > 1024 {
		return nil, fmt.Errorf("bench: %w: connections %d out of range; want 1–1024", fence.ErrInvalidArgument, connections)
	}
	f := &Fenced{}
	for range connections {
		c, err := client.New(endpoints, opts...)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		f.clients = append(f.clients, c)
	}
	return f, nil
}

// Name implements System.
func (f *Fenced) Name() string { return "fenced" }

// NewLocker implements System: one session, renewed by the shared client.
func (f *Fenced) NewLocker(ctx context.Context, id int, ttl time.Duration) (Locker, error) {
	c := f.clients[id%len(f.clients)]
	s, err := c.NewSession(ctx, client.WithTTL(ttl))
	if err != nil {
		return nil, err
	}
	return &fencedLocker{c: c, s: s, mutexes: map[string]*client.Mutex{}, permits: map[string]*client.Permits{}, rw: map[string]*client.RWMutex{},
		queues: map[string]*client.Queue{}, claims: map[string]*client.Claim{}}, nil
}

// Close implements System.
func (f *Fenced) Close() error {
	// All at once: a client whose servers are gone waits up to its
	// request timeout to close its sessions (bench/scale kills the
	// servers first), and one after another that was minutes.
	errs := make([]error, len(f.clients))
	var wg sync.WaitGroup
	for i, c := range f.clients {
		wg.Go(func() { errs[i] = c.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fencedLocker is one session and a Mutex per lock name it has used.
type fencedLocker struct {
	c       *client.Client
	s       *client.Session
	mu      sync.Mutex
	mutexes map[string]*client.Mutex
	permits map[string]*client.Permits // held, by semaphore name
	rw      map[string]*client.RWMutex
	queues  map[string]*client.Queue
	claims  map[string]*client.Claim // held, by "queue/item"
}

var _ RWLocker = (*fencedLocker)(nil)

func (l *fencedLocker) rwmutex(name string) *client.RWMutex {
	return cached(&l.mu, l.rw, name, func() *client.RWMutex { return client.NewRWMutex(l.s, name) })
}

// cached returns byName[name], made with newValue under mu the first time.
func cached[T any](mu *sync.Mutex, byName map[string]T, name string, newValue func() T) T {
	mu.Lock()
	defer mu.Unlock()
	v, ok := byName[name]
	if !ok {
		v = newValue()
		byName[name] = v
	}
	return v
}

// RWLock implements RWLocker: it waits in the read/write lock's FIFO
// queue.
func (l *fencedLocker) RWLock(ctx context.Context, name string, write bool) (uint64, error) {
	m := l.rwmutex(name)
	lock := m.RLock
	if write {
		lock = m.Lock
	}
	g, err := lock(ctx)
	if err != nil {
		return 0, err
	}
	return uint64(g.Token()), nil
}

// RWUnlock implements RWLocker.
func (l *fencedLocker) RWUnlock(ctx context.Context, name string) error {
	return l.rwmutex(name).Unlock(ctx)
}

func (l *fencedLocker) mutex(name string) *client.Mutex {
	return cached(&l.mu, l.mutexes, name, func() *client.Mutex { return client.NewMutex(l.s, name) })
}

// Lock implements Locker: it waits in the lock's FIFO queue.
func (l *fencedLocker) Lock(ctx context.Context, name string) (uint64, error) {
	m := l.mutex(name)
	if err := m.Lock(ctx); err != nil {
		return 0, err
	}
	return uint64(m.Token()), nil
}

// Unlock implements Locker.
func (l *fencedLocker) Unlock(ctx context.Context, name string) error {
	return l.mutex(name).Unlock(ctx)
}

// AcquirePermit implements Semaphorer: it waits in the semaphore's FIFO
// queue for one permit.
func (l *fencedLocker) AcquirePermit(ctx context.Context, name string, capacity int) (uint64, int, error) {
	p, err := client.NewSemaphore(l.s, name, capacity).Acquire(ctx, 1)
	if err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	l.permits[name] = p
	l.mu.Unlock()
	first := p.List()[0]
	return uint64(first.Token), first.Slot, nil
}

// ReleasePermit implements Semaphorer.
func (l *fencedLocker) ReleasePermit(ctx context.Context, name string) error {
	l.mu.Lock()
	p := l.permits[name]
	delete(l.permits, name)
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("bench: no permit of %q held", name)
	}
	return p.Release(ctx)
}

// FencedWrite writes to the cluster's own fenced key-value store.
func (l *fencedLocker) FencedWrite(ctx context.Context, key string, value []byte, token uint64) error {
	_, err := l.c.KVPut(ctx, key, value, fence.Token(token))
	return err
}

// Close implements Locker: it closes the session, releasing its locks.
func (l *fencedLocker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.s.Close(ctx)
}
