// Package fsm is fenced's replicated state machine: sessions with TTLs,
// exclusive locks with FIFO wait queues, the one token counter of the
// cluster and the table that de-duplicates retried requests.
//
// The Machine is pure and deterministic (docs/design.md §3): it reads no clock,
// does no I/O and iterates in sorted order wherever the order decides a
// token, so every replica that applies the same commands reaches the same
// state and issues the same tokens. Time enters only as values inside
// commands. Session expiry is decided by the leader's lease loop and arrives
// here as an ExpireSession command carrying its proposer's term; an expiry
// proposed in a term older than the newest leadership applied is ignored,
// so a deposed leader can never revoke live sessions.
//
// A Machine is not safe for concurrent use; the server wraps it with a lock.
package fsm
