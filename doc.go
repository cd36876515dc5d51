// Package fence holds the domain types of fenced: fencing tokens, grants,
// the validation rules every API call applies, the errors callers check with
// errors.Is, and the Guard interface that protected resources implement.
//
// A fencing token is a 64-bit number ordered after every token the same
// issuer (one fenced cluster) has issued before, across restarts and leader
// failover. A lease (a session's TTL) only limits how long a holder should
// believe it holds a lock; it cannot stop a paused holder from writing after
// the lease ran out. Safety comes from the resource: it rejects a write whose
// token is lower than the highest token it has accepted for the object,
// atomically with the write. See docs/design.md §1.
//
// This package imports only the standard library.
package fence
