package main

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd has no semaphore (neither concurrency nor experimental/recipes
// has one), so this is the recipe a user would build from its documented
// primitives (https://etcd.io/docs/v3.4/learning/api/: leases, Txn,
// revisions, watch with prev_kv), modelled on concurrency.Mutex:
//
//  1. In one Txn, count the keys under /sem/<name>/ (every holder and
//     waiter has one) and put this holder's key /sem/<name>/<lease> on
//     its session's lease. The Txn's revision is the key's create
//     revision; the count is how many keys are ahead of it (the keys
//     created before it, in create-revision order: FIFO).
//  2. Fewer than capacity ahead: the permit is held. Otherwise watch the
//     prefix from the next revision, with prev_kv, and count down every
//     DELETE of a key created before this one (a release, or a lease
//     that expired) until fewer than capacity are ahead. No polling and
//     no extra reads; every waiter does receive every delete event on its
//     watch (all watches share the client's one gRPC stream).
//
// Release deletes the key. The token is the key's create revision: etcd
// has no slots, so it is not checked per slot (slot -1).

// etcdPermit is this holder's key in one semaphore.
type etcdPermit struct {
	key string
	rev int64
}

func (l *etcdLocker) AcquirePermit(ctx context.Context, name string, capacity int) (uint64, int, error) {
	cli := l.s.Client()
	prefix := "/sem/" + name + "/"
	key := fmt.Sprintf("%s%x", prefix, l.s.Lease())
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()), clientv3.OpPut(key, "", clientv3.WithLease(l.s.Lease()))).
		Commit()
	if err != nil {
		return 0, -1, err
	}
	if !resp.Succeeded {
		return 0, -1, fmt.Errorf("etcd semaphore %s: this session already has a key", name)
	}
	rev := resp.Header.Revision
	ahead := resp.Responses[0].GetResponseRange().Count
	l.setPermit(name, etcdPermit{key: key, rev: rev})
	if ahead < int64(capacity) {
		return uint64(rev), -1, nil
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV(), clientv3.WithFilterPut()) {
		if err := wr.Err(); err != nil {
			l.abandonPermit(name)
			return 0, -1, err
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.DELETE || ev.PrevKv == nil {
				continue
			}
			if string(ev.PrevKv.Key) == key {
				l.abandonPermit(name)
				return 0, -1, errors.New("etcd semaphore: own key deleted (session lost)")
			}
			if ev.PrevKv.CreateRevision < rev {
				ahead--
			}
		}
		if ahead < int64(capacity) {
			return uint64(rev), -1, nil
		}
	}
	l.abandonPermit(name)
	if err := ctx.Err(); err != nil {
		return 0, -1, err
	}
	return 0, -1, errors.New("etcd semaphore: watch closed")
}

func (l *etcdLocker) ReleasePermit(ctx context.Context, name string) error {
	l.mu.Lock()
	p, ok := l.permits[name]
	delete(l.permits, name)
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("etcd semaphore %s: not held", name)
	}
	_, err := l.s.Client().Delete(ctx, p.key)
	return err
}

func (l *etcdLocker) setPermit(name string, p etcdPermit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.permits[name] = p
}

// abandonPermit deletes the key of a wait that failed, so it holds no
// place in line (as concurrency.Mutex does on a failed Lock).
func (l *etcdLocker) abandonPermit(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdCleanupTimeout)
	defer cancel()
	_ = l.ReleasePermit(ctx, name)
}
