package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fenced-dev/fenced/bench"
)

// benchCase is one row group of the comparison: a workload at one size,
// run against some targets.
type benchCase struct {
	// ID names the case in flags, progress lines and the raw results.
	ID string `json:"id"`
	// Title describes it in the report.
	Title    string         `json:"title"`
	Workload bench.Workload `json:"workload"`
	// Clients run cycles concurrently, or open holders concurrently
	// (sessions).
	Clients int `json:"clients"`
	// Sessions is the number of holders kept alive (sessions only).
	Sessions int `json:"sessions,omitempty"`
	// Capacity is the semaphore's number of permits (semaphore only).
	Capacity int `json:"capacity,omitempty"`
	// Failovers is how many leader kills one measurement of the
	// election-failover case makes (0 for the other cases).
	Failovers int `json:"failovers,omitempty"`
	// Targets are the systems this case runs against, in report order.
	Targets []string `json:"targets"`
	// PerLocker gives every locker a client (connection) of its own, as
	// N independent processes would have, instead of one client shared by
	// all lockers. ZooKeeper and Redis are the same either way (a
	// connection per session; a pool of one connection per client).
	PerLocker bool `json:"per_locker,omitempty"`
	// Batch is the permits per round trip of the limiter workload on the
	// targets whose name ends in -batch (the others take one per decision).
	Batch int `json:"batch,omitempty"`
	// VsEtcd and VsRedis name the targets the report's ratios divide by;
	// empty for none.
	VsEtcd  string `json:"vs_etcd,omitempty"`
	VsRedis string `json:"vs_redis,omitempty"`
}

// sessionOpeners is how many holders the sessions workload opens at a
// time.
const sessionOpeners = 64

var singleNode = []string{"fenced", "etcd", "zookeeper", "redis"}

// withGrantors adds the library grantors (fence.Grantor on a store the
// team already runs) to the single-node targets, for the lock workloads.
var withGrantors = append(append([]string{}, singleNode...), "pggrant", "redisgrant")

// matrix is the whole comparison, in the order each run goes through it.
var matrix = []benchCase{
	{ID: "lock-16", Title: "lock, 16 clients, 1 node", Workload: bench.WorkloadLock, Clients: 16, Targets: withGrantors, VsEtcd: "etcd"},
	{ID: "lock-64", Title: "lock, 64 clients, 1 node", Workload: bench.WorkloadLock, Clients: 64, Targets: singleNode, VsEtcd: "etcd"},
	{ID: "lock-64-3n", Title: "lock, 64 clients, 3 nodes", Workload: bench.WorkloadLock, Clients: 64, Targets: []string{"fenced-3", "etcd-3"}, VsEtcd: "etcd-3"},
	{ID: "lock-64-indep", Title: "lock, 64 independent clients (a client per locker), 1 node", Workload: bench.WorkloadLock, Clients: 64, PerLocker: true, Targets: singleNode, VsEtcd: "etcd", VsRedis: "redis"},
	{ID: "lock-64-indep-3n", Title: "lock, 64 independent clients (a client per locker), 3 nodes", Workload: bench.WorkloadLock, Clients: 64, PerLocker: true, Targets: []string{"fenced-3", "etcd-3"}, VsEtcd: "etcd-3"},
	{ID: "handoff-16", Title: "handoff, 16 clients on one lock, 1 node", Workload: bench.WorkloadHandoff, Clients: 16, Targets: withGrantors, VsEtcd: "etcd", VsRedis: "redis"},
	{ID: "sessions-10k", Title: "sessions, 10,000 holders, 1 node", Workload: bench.WorkloadSessions, Clients: sessionOpeners, Sessions: 10000, Targets: singleNode, VsEtcd: "etcd"},
	{ID: "sessions-100k", Title: "sessions, 100,000 holders, 1 node", Workload: bench.WorkloadSessions, Clients: sessionOpeners, Sessions: 100000, Targets: []string{"fenced"}},
	{ID: "semaphore-64", Title: "semaphore of 8 permits, 64 clients, 1 node", Workload: bench.WorkloadSemaphore, Clients: 64, Capacity: 8, Targets: []string{"fenced", "etcd", "redis"}, VsEtcd: "etcd", VsRedis: "redis"},
	{ID: "rwlock-16", Title: "read/write lock, 16 clients, 90 % reads, 1 node", Workload: bench.WorkloadRWLock, Clients: 16, Targets: []string{"fenced", "etcd", "redis"}, VsEtcd: "etcd", VsRedis: "redis"},
	{ID: "election-failover", Title: "election failover: SIGKILL of the leader's process to the next leader's first token, 1 node", Workload: workloadElection, Failovers: 5, Targets: []string{"fenced", "etcd", "redis"}, VsEtcd: "etcd"},
	{ID: "fenced-write-64", Title: "fenced-write, 64 clients, 1 node", Workload: bench.WorkloadFencedWrite, Clients: 64, Targets: []string{"fenced"}},
	{ID: "queue-64", Title: "work queue, 64 workers on one queue (push → claim → ack)", Workload: bench.WorkloadQueue, Clients: 64, Targets: []string{"fenced", "fenced-3", "redis"}, VsRedis: "redis"},
	{ID: "queue-64-batch", Title: fmt.Sprintf("work queue, 64 workers on one queue, batches of %d (push %d → claim up to %d → ack them)", queueBatch, queueBatch, queueBatch), Workload: bench.WorkloadQueue, Clients: 64, Batch: queueBatch, Targets: []string{"fenced", "fenced-3", "redis"}, VsRedis: "redis"},
	{ID: "limiter-64", Title: "rate limiter (token bucket), 64 clients, one permit per decision; fenced-batch takes 64 per round trip", Workload: bench.WorkloadLimiter, Clients: 64, Batch: limiterBatch, Targets: []string{"fenced", "fenced-batch", "redis"}, VsRedis: "redis"},
}

// limiterBatch is the limiter-64 case's permits per round trip on
// fenced-batch.
const limiterBatch = 64

// queueBatch is the queue-64-batch case's items per call, the same on
// every target.
const queueBatch = 16

// batchFor returns the batch of target name in c: for the queue, c.Batch
// on every target; for the limiter, c.Batch on the -batch targets, 0 (one
// permit per decision) on the others.
func (c benchCase) batchFor(name string) int {
	if c.Workload == bench.WorkloadQueue || strings.HasSuffix(name, "-batch") {
		return c.Batch
	}
	return 0
}

// selectMatrix returns the cases (and their targets) that the --workloads
// and --systems filters keep; an empty filter keeps everything. A
// workload filter entry matches a case ID or a workload name.
func selectMatrix(workloads, systems string) ([]benchCase, error) {
	wl, sy := splitList(workloads), splitList(systems)
	for _, s := range sy {
		if _, ok := targetByName(s); !ok {
			return nil, fmt.Errorf("--systems: unknown system %q; want some of %s", s, targetNames())
		}
	}
	var known []string
	for _, c := range matrix {
		known = append(known, c.ID)
	}
	for _, w := range wl {
		if !slices.Contains(known, w) && !slices.Contains(bench.Workloads, bench.Workload(w)) && w != string(workloadElection) {
			return nil, fmt.Errorf("--workloads: unknown %q; want workload names %v or case ids %s", w, bench.Workloads, strings.Join(known, ","))
		}
	}
	var out []benchCase
	for _, c := range matrix {
		if len(wl) > 0 && !slices.Contains(wl, c.ID) && !slices.Contains(wl, string(c.Workload)) {
			continue
		}
		var ts []string
		for _, t := range c.Targets {
			if len(sy) == 0 || slices.Contains(sy, t) {
				ts = append(ts, t)
			}
		}
		if len(ts) > 0 {
			c.Targets = ts
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--workloads %q and --systems %q leave nothing to run", workloads, systems)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func targetNames() string {
	var names []string
	for _, t := range targets {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}
