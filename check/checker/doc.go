// Package checker judges a history recorded by the fault harness against
// the contract of docs/design.md §7: stale writes, token order, mutual
// exclusion, linearizability of the kv and the locks (with porcupine),
// lost acknowledgements and liveness after healing. All runs every
// checker; each returns the Violations it found, and none means the
// history passed.
package checker
