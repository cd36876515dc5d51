package main

import (
	"fmt"
	"strings"
)

// methodText explains how the figures were made, how each system is used,
// what durable means for each, and what is unfair or uncertain.
func methodText(s settings) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Method\n\n")
	w("All workloads are the `bench` package's (`bench.Run`), the same code for every system; only the `bench.System` adapter differs (`bench/compare/*.go`).\n\n")
	w("- **lock**: every client takes and releases a lock of its own, in a loop (uncontended acquire → token → release).\n")
	w("- **handoff**: all clients take and release one lock, so every cycle hands it to the next waiter; the token of each grant must be above the previous grant's (checked; violations are reported).\n")
	w("- **sessions**: N holders each open a session and take a lock of their own; then all stay open, idle, for the measured time while the server's CPU and memory are sampled.\n")
	w("- **fenced-write**: acquire → write 128 bytes to fenced's own fenced key-value store with the token → release (fenced only: the others have no resource that checks tokens).\n")
	w("- **semaphore**: every client takes and releases one permit of the same semaphore (semaphore-64: 8 permits, 64 clients); more holders at once than permits would be reported (capacity violations), and for fenced, whose permits are slots, each slot's tokens must rise.\n")
	w("- **rwlock**: every client takes and releases the same read/write lock, a read grant in nine cycles of ten and the write grant in the tenth (rwlock-16: 16 clients); the writers' tokens must rise.\n")
	w("- **election-failover**: not a cycle workload; see its section above. Candidates are processes of this program (`compare candidate --system S`), killed with SIGKILL, with a session TTL of %v.\n\n", s.ElectionTTL)
	w("Every client is one `Locker` with a session of its own (TTL %v: etcd lease, ZooKeeper session timeout, Redis key expiry, fenced session). ", s.TTL)
	w("The cycle workloads warm up for %v unmeasured, then measure for %v; the sessions workload measures %v after its set-up. ", s.Warmup, s.Duration, s.Duration)
	w("Latencies are taken on the monotonic clock in the client; server CPU and RSS come from /proc of the server processes (the sum over nodes).\n\n")
	w("Order and repetition: the whole matrix runs %d time(s), run 1 of every case and system, then run 2, and so on; within a case the order of systems rotates from run to run. ", s.Runs)
	w("**Every measurement starts its system afresh** (new process or processes, empty data directory under /tmp, new loopback ports) and stops it afterwards, so no run inherits another's data, sessions or caches. ")
	w("The report shows the median over runs of each figure, taken figure by figure. The `fenced` binary is built from the working tree (`go build ./cmd/fenced`) at the start of each invocation.\n\n")

	w("## How each system is used\n\n")
	w("Each as its documentation recommends for a lock with a session, on a single node unless the case says 3 nodes:\n\n")
	w("- **fenced** (`bench.NewFenced`): one SDK `client.Client` for all lockers (one HTTP/2 connection; all sessions kept alive over one KeepAlive stream), or in the -indep cases one `client.Client` per locker (`fenced bench --clients N --connections N`), a `client.Session` per locker and a `client.Mutex` per lock name. Token: the grant's fencing token. Nodes: `fenced serve` with default Raft timings; 3 nodes bootstrap with `--initial-cluster`, and the SDK sends to the leader.\n")
	w("- **etcd**: one `clientv3.Client` for all lockers (one gRPC connection), or in the -indep cases one `clientv3.Client` per locker, a `concurrency.Session` per locker (a lease of the TTL, rounded up to whole seconds, kept alive by the client on one stream) and a `concurrency.Mutex` per lock name under `/locks/`. Waiters watch the key just before theirs. Token: the create revision of the Mutex's key (global, and the Mutex grants in create-revision order, so it rises per grant; read from `Mutex.IsOwner`, no extra request). With 3 nodes the client spreads requests over all members and followers forward writes to the leader.\n")
	w("- **ZooKeeper**: the lock recipe of the ZooKeeper documentation as Curator's `InterProcessMutex` does it: a protected ephemeral-sequential child under the container node `/locks/<name>`, the lowest child holds the lock, every other waiter watches only the child just before its own (no herd). A ZooKeeper session is a TCP connection, so every locker has its own `zk.Conn` (inherent in ZooKeeper: sessions cannot be multiplexed on a shared connection). Token: the czxid of the child node (the zxid of its creation: global, and the recipe grants in creation order); go-zookeeper's `Create` does not return the node's Stat, so one `exists` read fetches it, pipelined with the recipe's first `getChildren`.\n")
	w("- **Semaphore, read/write lock and election** (semaphore-64, rwlock-16, election-failover): fenced through its SDK's `client.NewSemaphore` (token and slot per permit), `client.NewRWMutex` and `client.NewElection` (server-side FIFO queues; the grant is pushed to the waiting call). " +
		"etcd has an election (`concurrency.Election`, used as is; token: the leader key's create revision, `Election.Rev`) and a read/write lock recipe (`experimental/recipes.RWMutex`, re-typed in `etcd_rwmutex.go` step for step only to take a context and expose the key's create revision as the token), but no semaphore: `etcd_semaphore.go` builds one from the documented primitives the way `concurrency.Mutex` builds the lock — one Txn counts the keys ahead and puts the holder's key on its lease, and a waiter watches the prefix (with prev_kv) for the deletes of keys created before its own, holding a permit once fewer than the capacity are ahead (FIFO, no polling, no extra reads; every waiter's watch receives every release). " +
		"Redis has none of the three: `redis_semaphore.go` has the scripts (a counting semaphore as a sorted set of holders scored by expiry, after *Redis in Action* §6.3; a read/write lock as a writer key with PX plus a sorted set of readers; acquire and release one Lua script each, tokens from the same INCR counter), waiters poll like the lock's, and the election is the lock itself (the leader holds `SET NX PX`, refreshed every TTL/3; candidates poll). " +
		"ZooKeeper is not in these cases: its recipes for them (Curator's `InterProcessSemaphoreV2`, `InterProcessReadWriteLock`, `LeaderLatch`) are not built here.\n")
	w("- **Redis**: the single-instance lock pattern from the Redis documentation (what redsync/Redlock do per instance) plus a counter for tokens: acquire is one Lua script, `SET lock:<name> <owner> NX PX <ttl>` and on success `INCR lock:fence` (the token, one counter for all locks); release is a Lua compare-and-delete. Redis has no queue or notification for this, so a waiter retries after a random %v–%v sleep (redsync's default is 50–250 ms, node-redlock's 200 ± 200 ms; the short poll favours Redis's throughput and latency at the cost of polling load). Sessions: each holder refreshes its locks every TTL/3 with a compare-and-PEXPIRE script (redsync's Extend). One go-redis client with a pool of %d connections for all lockers.\n\n", DefaultRedisRetryMin, DefaultRedisRetryMax, RedisPoolSize)

	w("## What \"durable\" means for each\n\n")
	w("- **fenced**: every grant and release is a Raft log entry fsynced (raft-wal) before it is acknowledged; with 3 nodes, on a majority.\n")
	w("- **etcd**: defaults, the WAL is fsynced before a proposal is acknowledged (`--unsafe-no-fsync` off); with 3 nodes, on a majority.\n")
	w("- **ZooKeeper**: defaults, `forceSync=yes`: the transaction log is fsynced before a write is acknowledged. Standalone (one node). `maxClientCnxns=0` because every session is its own connection from 127.0.0.1; the admin HTTP server is off.\n")
	w("- **Redis**: `--appendonly yes --appendfsync always`: the append-only file is fsynced before replies (Redis batches the fsync per event-loop pass). RDB snapshots are off (`--save \"\"`) so no fork lands in a measurement. One node, **not replicated**: Redis's replication is asynchronous, so a failover can lose granted locks and roll the token counter back; Redis is here as a reference point for a single durable node, not as an equivalent of the replicated systems.\n\n")

	w("## What is unfair or uncertain\n\n")
	w("- One 2-core machine runs the clients (one Go process) and the servers at once, so client CPU competes with server CPU, and the machine is shared with other work; compare systems within one report, never across machines. Loopback only: no network latency.\n")
	w("- ZooKeeper runs in a JVM with the package's default flags (no heap size set); its RSS includes heap the JVM has reserved and not returned, and a %v warm-up is short for the JIT. Its 10,000 sessions are 10,000 TCP connections from one client process, which also loads the client side.\n", s.Warmup)
	w("- ZooKeeper pays one extra (pipelined, local) read per grant to learn the czxid; Curator itself gives no token at all.\n")
	w("- Redis waiters poll (no FIFO queue): handoff order is not fair, and its throughput depends on the poll interval chosen above. Redis is one unreplicated node while fenced-3 and etcd-3 replicate.\n")
	w("- etcd is Debian's 3.4 server (built with Go 1.19) driven by the 3.6 Go client: the v3 API it uses (leases, keep-alive, Txn, watch) is the same, and `go test` in bench/compare checks the lock works, but a newer etcd server may be faster. Its lease TTL has whole-second granularity.\n")
	w("- In the sessions workload every holder's liveness costs one message per TTL/3 with each library (etcd's and fenced's clients renew over one shared stream, the ZooKeeper client pings on each connection, Redis runs one script per lock); RSS also counts what each server keeps per connection, which for ZooKeeper is one per session.\n")
	if s.Duration < s.TTL {
		w("- This report's measured time (%v) is shorter than the TTL (%v): few keep-alives fall inside the idle phase, so its CPU figures understate the steady cost of sessions.\n", s.Duration, s.TTL)
	}
	w("- etcd's semaphore and read/write lock wait through one watch per waiter, created for each wait: the etcd client creates the watches of one stream one at a time, and a release of the semaphore is delivered to every waiter's watch. That is what the documented primitives offer; a recipe with fewer watches would need more reads. Redis's semaphore and read/write lock poll (no queue, not fair; its readers can starve a writer) and are one unreplicated node.\n")
	w("- Election failover waits, in all three systems, for the killed leader's session to run out (etcd: lease TTL in whole seconds, at least 2 s with its default Raft timings, so %v is its shortest; fenced: session TTL; Redis: the key's PX), then for the next candidate to be told (etcd: a watch event; fenced: the pushed reply to the waiting Campaign; Redis: the next poll). The spread within a system comes from when, within TTL/3, the last renewal happened before the kill.\n", s.ElectionTTL)
	w("- fsync cost dominates the write-bound cases and depends on the disk under /tmp (see the machine below); all four systems fsync, each with its own batching (group commit).\n\n")
	return b.String()
}
