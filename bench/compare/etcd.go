package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fenced-dev/fenced/bench"
)

// Etcd is the bench.System for etcd, used as the etcd client's
// concurrency package recommends: one clientv3.Client (one gRPC
// connection) shared by every locker, each locker a concurrency.Session
// (a lease whose keep-alives the client sends, multiplexed on one stream)
// and a concurrency.Mutex per lock name, under the prefix /locks/.
//
// The token of a grant is the create revision of the Mutex's key: etcd's
// revision counter is global and a key created later has a higher one, and
// the Mutex grants in create-revision order, so each grant of a lock has a
// higher token than the one before. (Mutex.Header().Revision also rises
// per grant, but for a waiter it is the revision of a later read, not of
// anything that identifies the grant.) It is read from Mutex.IsOwner, so it
// costs no extra request.
//
// With perLocker, every locker has a clientv3.Client of its own (its own
// gRPC connection and keep-alive stream), as independent processes would.
type Etcd struct {
	endpoints []string
	perLocker bool
	cli       *clientv3.Client // the shared client; nil when perLocker
}

// NewEtcd connects to the etcd members at endpoints (host:port): once
// for all lockers, or, when perLocker, once per locker in NewLocker.
func NewEtcd(endpoints []string, perLocker bool) (*Etcd, error) {
	e := &Etcd{endpoints: endpoints, perLocker: perLocker}
	if perLocker {
		return e, nil
	}
	cli, err := e.dial()
	if err != nil {
		return nil, err
	}
	e.cli = cli
	return e, nil
}

// dial makes a client of the members.
func (e *Etcd) dial() (*clientv3.Client, error) { return newEtcdClient(e.endpoints) }

// Name implements bench.System.
func (e *Etcd) Name() string { return "etcd" }

// NewLocker implements bench.System: a lease of ttl (whole seconds,
// rounded up; etcd has no finer TTL) kept alive by the shared client, or
// by the locker's own client.
func (e *Etcd) NewLocker(ctx context.Context, id int, ttl time.Duration) (bench.Locker, error) {
	cli, own := e.cli, (*clientv3.Client)(nil)
	if e.perLocker {
		c, err := e.dial()
		if err != nil {
			return nil, err
		}
		cli, own = c, c
	}
	l, err := newEtcdLocker(ctx, cli, ttl)
	if err != nil {
		if own != nil {
			_ = own.Close()
		}
		return nil, err
	}
	l.own = own
	return l, nil
}

func newEtcdLocker(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*etcdLocker, error) {
	secs := max(1, int(math.Ceil(ttl.Seconds())))
	// Granting here, under ctx, bounds the wait; the session then keeps
	// the lease alive on the client's own context.
	lease, err := cli.Grant(ctx, int64(secs))
	if err != nil {
		return nil, fmt.Errorf("etcd grant lease: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(secs))
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	return &etcdLocker{s: s, mutexes: map[string]*concurrency.Mutex{}, permits: map[string]etcdPermit{}, rw: map[string]etcdRW{}}, nil
}

// Close implements bench.System.
func (e *Etcd) Close() error {
	if e.cli == nil {
		return nil
	}
	return e.cli.Close()
}

// etcdLocker is one session and a Mutex per lock name it has used.
type etcdLocker struct {
	s       *concurrency.Session
	own     *clientv3.Client // the locker's own client, closed with it; nil if shared
	mu      sync.Mutex
	mutexes map[string]*concurrency.Mutex
	permits map[string]etcdPermit
	rw      map[string]etcdRW
}

func (l *etcdLocker) mutex(name string) *concurrency.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.mutexes[name]
	if !ok {
		m = concurrency.NewMutex(l.s, "/locks/"+name)
		l.mutexes[name] = m
	}
	return m
}

func (l *etcdLocker) Lock(ctx context.Context, name string) (uint64, error) {
	m := l.mutex(name)
	if err := m.Lock(ctx); err != nil {
		return 0, err
	}
	return createRevision(m)
}

// createRevision returns the create revision of m's key, which m holds.
func createRevision(m *concurrency.Mutex) (uint64, error) {
	cmp := m.IsOwner()
	rev, ok := cmp.TargetUnion.(*pb.Compare_CreateRevision)
	if !ok || rev.CreateRevision <= 0 {
		return 0, errors.New("etcd: mutex has no create revision")
	}
	return uint64(rev.CreateRevision), nil
}

func (l *etcdLocker) Unlock(ctx context.Context, name string) error {
	return l.mutex(name).Unlock(ctx)
}

func (l *etcdLocker) Close() error {
	// Session.Close revokes the lease (deleting any lock keys on it),
	// bounded by the lease's TTL.
	err := l.s.Close()
	if l.own != nil {
		err = errors.Join(err, l.own.Close())
	}
	return err
}
