package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/fenced-dev/fenced/bench"
)

// ZooKeeper is the bench.System for ZooKeeper, with the lock recipe of the
// ZooKeeper documentation as Apache Curator's InterProcessMutex implements
// it: a protected ephemeral-sequential child under /locks/<name> (a
// container node), the lowest child holds the lock, every other waiter
// watches only the child just before its own (no herd effect).
//
// A ZooKeeper session is a TCP connection: each locker has a zk.Conn of its
// own, with the session timeout set to the locker's ttl (the server clamps
// it to 2–20 ticks, 4–40 s with tickTime=2000) and the client's pings
// keeping it alive. Many lockers cannot share one session and still be
// separate holders, so unlike etcd and fenced there is no shared client.
//
// The token of a grant is the czxid of the lock's child node: the zxid of
// the transaction that created it, global and increasing, and the recipe
// grants in creation order. go-zookeeper's Create does not return the
// node's Stat, so it is read with one Exists, sent concurrently with the
// recipe's first getChildren (pipelined on the same connection).
type ZooKeeper struct {
	servers []string
	// once creates /locks, the parent of every lock, with the first
	// session; rootErr is its failure.
	once    sync.Once
	rootErr error
}

// NewZooKeeper returns the System for the ZooKeeper servers at endpoints
// (host:port).
func NewZooKeeper(endpoints []string) (*ZooKeeper, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("zookeeper: no endpoints")
	}
	return &ZooKeeper{servers: endpoints}, nil
}

// Name implements bench.System.
func (z *ZooKeeper) Name() string { return "zookeeper" }

// zkBufferSize bounds each connection's read and write buffers (the
// library allocates 1.5 MiB each by default, 30 GiB for 10,000 sessions).
// Lock children lists are far smaller.
const zkBufferSize = 256 << 10

// NewLocker implements bench.System: one connection, one session.
func (z *ZooKeeper) NewLocker(ctx context.Context, id int, ttl time.Duration) (bench.Locker, error) {
	conn, err := dialZK(ctx, z.servers, ttl)
	if err != nil {
		return nil, err
	}
	z.once.Do(func() {
		if _, err := conn.Create("/locks", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			z.rootErr = fmt.Errorf("zookeeper: create /locks: %w", err)
		}
	})
	if z.rootErr != nil {
		conn.Close()
		return nil, z.rootErr
	}
	return &zkLocker{conn: conn, held: map[string]string{}}, nil
}

// dialZK connects and waits (under ctx) until the session is established.
func dialZK(ctx context.Context, servers []string, ttl time.Duration) (*zk.Conn, error) {
	established := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect(servers, ttl,
		zk.WithLogInfo(false),
		zk.WithLogger(quietLogger{}),
		zk.WithMaxBufferSize(zkBufferSize),
		zk.WithMaxConnBufferSize(zkBufferSize),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(established) })
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zookeeper connect: %w", err)
	}
	select {
	case <-established:
		return conn, nil
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("zookeeper: no session: %w", ctx.Err())
	}
}

// Close implements bench.System; the connections are the lockers'.
func (z *ZooKeeper) Close() error { return nil }

// quietLogger drops the client library's log lines.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// zkLocker is one session and the child node it holds per lock name.
type zkLocker struct {
	conn *zk.Conn
	mu   sync.Mutex
	held map[string]string // lock name → path of our child node
}

// lockParent is the container node under which name's contenders queue.
func lockParent(name string) string { return "/locks/" + url.PathEscape(name) }

func (l *zkLocker) Lock(ctx context.Context, name string) (uint64, error) {
	parent := lockParent(name)
	path, err := l.createChild(parent)
	if err != nil {
		return 0, err
	}
	mySeq, err := zkSeq(path)
	if err != nil {
		return 0, err
	}
	czxid := make(chan zkStat, 1)
	go func() {
		_, st, err := l.conn.Exists(path)
		czxid <- zkStat{st, err}
	}()
	if err := l.waitTurn(ctx, parent, mySeq); err != nil {
		_ = l.conn.Delete(path, -1)
		<-czxid
		return 0, err
	}
	s := <-czxid
	if s.err != nil || s.stat == nil {
		_ = l.conn.Delete(path, -1)
		return 0, fmt.Errorf("zookeeper: stat %s: %v (node missing: session lost?)", path, s.err)
	}
	l.mu.Lock()
	l.held[name] = path
	l.mu.Unlock()
	return uint64(s.stat.Czxid), nil
}

type zkStat struct {
	stat *zk.Stat
	err  error
}

// createChild creates our ephemeral-sequential child under parent,
// creating the parent (a container node, as Curator does) when it is
// missing; the server removes empty containers, so this can recur.
func (l *zkLocker) createChild(parent string) (string, error) {
	acl := zk.WorldACL(zk.PermAll)
	for range 5 {
		path, err := l.conn.CreateProtectedEphemeralSequential(parent+"/lock-", nil, acl)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", fmt.Errorf("zookeeper: create lock node under %s: %w", parent, err)
		}
		if _, err := l.conn.CreateContainer(parent, nil, zk.FlagContainer, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return "", fmt.Errorf("zookeeper: create %s: %w", parent, err)
		}
	}
	return "", fmt.Errorf("zookeeper: %s keeps disappearing", parent)
}

// waitTurn returns when our child (sequence mySeq) is the lowest under
// parent, watching only the child just before ours meanwhile.
func (l *zkLocker) waitTurn(ctx context.Context, parent string, mySeq int64) error {
	for {
		children, _, err := l.conn.Children(parent)
		if err != nil {
			return fmt.Errorf("zookeeper: children of %s: %w", parent, err)
		}
		prev, prevSeq := "", int64(-1)
		for _, c := range children {
			s, err := zkSeq(c)
			if err != nil {
				continue
			}
			if s < mySeq && s > prevSeq {
				prev, prevSeq = c, s
			}
		}
		if prev == "" {
			return nil
		}
		_, _, ch, err := l.conn.GetW(parent + "/" + prev)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone already: look again
		}
		if err != nil {
			return fmt.Errorf("zookeeper: watch %s: %w", prev, err)
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				return fmt.Errorf("zookeeper: watch %s: %w", prev, ev.Err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// zkSeq parses the 10-digit sequence number ZooKeeper appends to a
// sequential node's name.
func zkSeq(path string) (int64, error) {
	if len(path) < 10 {
		return 0, fmt.Errorf("zookeeper: %q has no sequence number", path)
	}
	s, err := strconv.ParseInt(path[len(path)-10:], 10, 64)
	if err != nil || !strings.Contains(path, "lock-") {
		return 0, fmt.Errorf("zookeeper: %q has no sequence number", path)
	}
	return s, nil
}

func (l *zkLocker) Unlock(ctx context.Context, name string) error {
	l.mu.Lock()
	path, ok := l.held[name]
	delete(l.held, name)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("zookeeper: %s is not held", name)
	}
	if err := l.conn.Delete(path, -1); err != nil {
		return fmt.Errorf("zookeeper: delete %s: %w", path, err)
	}
	return nil
}

func (l *zkLocker) Close() error {
	// Closing the connection closes the session; the server deletes its
	// ephemeral nodes.
	l.conn.Close()
	return nil
}
