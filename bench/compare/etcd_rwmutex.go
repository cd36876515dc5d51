package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdCleanupTimeout bounds the delete of a key whose wait failed.
const etcdCleanupTimeout = 5 * time.Second

// The read/write lock is etcd's own recipe, experimental/recipes.RWMutex
// (go.etcd.io/etcd/client/v3/experimental/recipes/rwmutex.go, v3.6.16),
// step for step: a reader creates an ephemeral key <prefix>/read/<ns>
// and a writer <prefix>/write/<ns> on its session's lease (a Txn that
// creates the key only if absent); a reader then waits until no write
// key created before its own is left, a writer until no key at all
// created before its own is left, each time watching only the last such
// key for its DELETE and looking again. Release deletes the key.
//
// It is re-typed here rather than called because the recipe's methods take
// no context (they use context.TODO(), so the end of a run could not cut a
// wait short) and do not expose the key's create revision, which is the
// grant's token (writers are granted in create-revision order).

// etcdRW is this holder's key in one read/write lock.
type etcdRW struct {
	key string
	rev int64
}

func (l *etcdLocker) RWLock(ctx context.Context, name string, write bool) (uint64, error) {
	cli := l.s.Client()
	pfx := "/rwlocks/" + name + "/"
	kind := "read"
	if write {
		kind = "write"
	}
	// newUniqueEphemeralKey: <prefix>/<kind>/<UnixNano>, retried on a clash.
	var key string
	var rev int64
	for {
		key = fmt.Sprintf("%s%s/%v", pfx, kind, time.Now().UnixNano())
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Version(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(l.s.Lease()))).
			Commit()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			rev = resp.Header.Revision
			break
		}
	}
	l.setRW(name, etcdRW{key: key, rev: rev})
	wait := pfx + "write/"
	if write {
		wait = pfx
	}
	for {
		done, err := waitOnLastRev(ctx, cli, wait, rev)
		if err != nil {
			l.abandonRW(name)
			return 0, err
		}
		if done {
			return uint64(rev), nil
		}
	}
}

// waitOnLastRev is the recipe's: wait for the DELETE of the last key under
// pfx created before rev; true when there is none.
func waitOnLastRev(ctx context.Context, cli *clientv3.Client, pfx string, rev int64) (bool, error) {
	opts := append(clientv3.WithLastRev(), clientv3.WithMaxModRev(rev-1))
	last, err := cli.Get(ctx, pfx, opts...)
	if err != nil {
		return false, err
	}
	if len(last.Kvs) == 0 {
		return true, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(wctx, string(last.Kvs[0].Key), clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return false, err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return false, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return false, errors.New("etcd rwlock: watch closed")
}

func (l *etcdLocker) RWUnlock(ctx context.Context, name string) error {
	l.mu.Lock()
	k, ok := l.rw[name]
	delete(l.rw, name)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("etcd rwlock %s: not held", name)
	}
	_, err := l.s.Client().Delete(ctx, k.key)
	return err
}

func (l *etcdLocker) setRW(name string, k etcdRW) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rw[name] = k
}

func (l *etcdLocker) abandonRW(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
	defer cancel()
	_ = l.RWUnlock(ctx, name)
}
