// Package bench runs lock-service workloads and measures them: the code
// behind `fenced bench` and behind the side-by-side comparison with etcd,
// ZooKeeper and Redis in the bench/compare module.
//
// A workload drives a System through Lockers, one per client, and reports
// throughput and latency percentiles measured on the monotonic clock after
// a warm-up, plus the server processes' CPU and memory when they run on this
// machine. The workloads:
//
//   - lock: every client takes and releases its own lock (uncontended
//     acquire → token → release cycles).
//   - handoff: every client takes and releases the same lock, so each
//     cycle hands the lock from one client to the next.
//   - sessions: opens Sessions holders, each holding its own lock, and
//     keeps them alive for the duration while the server's CPU and RSS are
//     sampled.
//   - fenced-write: acquire → write to a fenced resource with the token →
//     release.
//   - semaphore: every client takes and releases one permit of the same
//     semaphore of Capacity permits (systems implementing Semaphorer),
//     checking that no more clients hold a permit at once than the
//     capacity and that each slot's tokens increase.
//   - rwlock: every client takes and releases the same read/write lock,
//     a read grant in nine cycles of ten and the write grant in the tenth.
//   - limiter: every client asks one token bucket for one permit at a
//     time (systems implementing LimiterSystem), or Batch permits per
//     round trip.
//   - queue: every client is a worker on one shared work queue, looping
//     push → claim → ack (lockers implementing Queuer), checking that each
//     claim of an item carries a token above its earlier claims'.
//
// Results are figures of one machine at one moment; compare systems only
// within one run on the same machine.
package bench
