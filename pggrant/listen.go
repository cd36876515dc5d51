package pggrant

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener holds one connection of the Grantor in LISTEN on the release
// channel and wakes the waiters of the name each notification carries.
// When the connection fails or stops answering, it reconnects and wakes
// every waiter, which may have missed a notification meanwhile.
type listener struct {
	g *Grantor

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	started bool
	done    chan struct{}
}

func newListener(g *Grantor) *listener {
	return &listener{g: g, waiters: map[string]map[chan struct{}]struct{}{}, done: make(chan struct{})}
}

// watch registers a waiter for name, starting the listener if need be.
// The channel receives (capacity 1, never blocking the listener) when
// name may have been released.
func (l *listener) watch(name string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	l.mu.Lock()
	if !l.started {
		l.started = true
		go l.run()
	}
	if l.waiters[name] == nil {
		l.waiters[name] = map[chan struct{}]struct{}{}
	}
	l.waiters[name][c] = struct{}{}
	l.mu.Unlock()
	return c, func() {
		l.mu.Lock()
		delete(l.waiters[name], c)
		if len(l.waiters[name]) == 0 {
			delete(l.waiters, name)
		}
		l.mu.Unlock()
	}
}

func (l *listener) wake(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.waiters[name] {
		poke(c)
	}
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cs := range l.waiters {
		for c := range cs {
			poke(c)
		}
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// wait waits until the listener has stopped (after the Grantor's ctx is
// cancelled).
func (l *listener) wait() {
	l.mu.Lock()
	started := l.started
	l.started = true // no start after Close
	l.mu.Unlock()
	if started {
		<-l.done
	}
}

// run keeps a LISTEN connection until the Grantor closes. A connection
// that has been silent for the re-check interval is pinged; one that does
// not answer is dropped and replaced.
func (l *listener) run() {
	defer close(l.done)
	ctx := l.g.ctx
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := l.connect(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, l.g.recheck)
			continue
		}
		backoff = 50 * time.Millisecond
		l.wakeAll() // anything released while not listening
		l.serve(ctx, conn)
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.Close(cctx)
		cancel()
	}
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, l.g.recheck)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.g.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+channel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// serve dispatches notifications until the connection fails.
func (l *listener) serve(ctx context.Context, conn *pgx.Conn) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, l.g.recheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.wake(n.Payload)
			continue
		case ctx.Err() != nil || conn.IsClosed():
			return
		}
		// Silent for the re-check interval: make sure the connection is
		// alive, and let the waiters look again.
		pctx, cancel := context.WithTimeout(ctx, l.g.recheck)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
		l.wakeAll()
	}
}
