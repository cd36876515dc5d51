// Package launch starts real `fenced serve` processes on loopback and wires
// them into a cluster whose every directed peer link goes through a TCP
// fault proxy of its own, so a partition can be cut link by link. It is the
// one launcher behind the fault harness (package check) and the
// real-process tests (package internal/proctest): addresses and data dirs
// (Plan), the arguments of `fenced serve` (Node.ServeArgs, Timing), the
// processes (Start, Process), readiness (WaitReady) and the links (Links).
package launch
