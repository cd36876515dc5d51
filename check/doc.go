// Package check is the fault harness behind `fenced check`: it starts a
// cluster of real `fenced serve` processes on loopback behind per-link TCP
// proxies, runs client worker processes that take locks (and, by
// workload, semaphore permits, read/write grants and leaderships:
// workload.go) and write a fenced key-value resource under their tokens,
// injects faults on a seeded
// schedule (pauses, kills, partitions, leadership transfers, clock skew,
// membership changes), records every operation, and checks the whole
// history against the contract of docs/design.md §7.
//
// The harness is this package (Run, the cluster, the workers, the
// nemesis). What it records is package history; the checkers that judge a
// history are package checker; package report writes the summary,
// violations and report.html of a run.
package check
