// Package fsm is fenced's replicated state machine: sessions with TTLs,
// exclusive locks with FIFO wait queues, the fenced kv, the one token
// counter of the cluster and the tables that de-duplicate retried requests.
//
// The Machine is pure and deterministic (docs/design.md): it reads no
// clock, does no I/O and iterates in sorted order wherever the order
// decides a token, so every replica that applies the same commands reaches
// the same state and issues the same tokens. Time enters only as values
// inside commands. Session expiry is decided by the leader's lease loop and
// arrives here as an ExpireSession command carrying its proposer's term; an
// expiry proposed in a term older than the newest leadership applied is
// ignored, so a deposed leader cannot revoke live sessions. The package
// imports no I/O package and no module but the protobuf runtime (deps_test.go).
//
// A Machine is not safe for concurrent use; the server wraps it with a lock.
//
// # Shared parts
//
// A primitive (the exclusive lock today) is built from parts every
// primitive shares; each lives in its own file:
//
//   - session binding (binding.go, session.go): a grant hangs off a
//     session. A primitive binds the objects a session holds and waits for
//     (session.bound[kind].hold, .wait); closing or expiring the session
//     calls every primitive's endSession, which releases them in name order
//     (binding.end). Machine.requestSession resolves a request's session,
//     creating a per-grant one for session 0, and checks the hash of the
//     secret the request presented (secret.go): only a session's creator
//     knows its secret, and the state keeps only its SHA-256.
//   - token issue (tokens.go): one counter for the whole cluster. Check
//     tokens.exhausted (the error is tokens.overflow) before changing
//     anything, then take tokens.next for every grant. tokens.next keeps
//     the token reservation (reservation.go): before it issues the first
//     token past the reserved end it extends the reservation by a block and
//     tells the node-local hook (SetReservationHook), which records the end
//     durably; a new leader's ReserveTokens restarts the counter above its
//     recorded end, so a log that lost its last grants never reissues their
//     tokens. The Machine does no I/O: the hook is the server's.
//   - FIFO waiters with push (waitqueue.go, binding.go): a waitQueue per
//     object; Machine.enqueue, Machine.leaveQueue and Machine.promote keep
//     the queue and the session binding in step. Every grant is pushed with
//     Observer.Granted and every wait that ends without one with
//     Observer.WaitEnded: the server wakes the call that waits with them.
//   - expiry (expiry.go): ExpireSession and NewLeader. A primitive adds
//     nothing: an expired session ends like a closed one.
//   - request de-duplication (dedup.go): each session remembers the results
//     of its newest requests by seq (replies.get, .put, .promote), so a
//     retried request is answered with its original result.
//   - snapshot (snapshot.go, primitive.go): the Machine writes the counters
//     and the sessions; each section writes and restores its own fields of
//     State.
//   - per-owner quotas (quota.go): a session records the identity it is
//     charged to, and its bindings count what that owner holds and waits
//     for over every primitive; a request carries the limits (a Quota) and
//     is refused with a QuotaError at one (checkSessionQuota in
//     createSession, checkHoldQuota before a new grant or place in a queue).
//   - pages (page.go): LocksAfter and SessionsAfter read a bounded page
//     after a cursor; LocksVisible and SessionsVisible do for a reader
//     who may see only some names, counting what they hide.
//
// # How to add a primitive
//
// A primitive is one file per layer. For a semaphore:
//
//  1. proto/fenced/state/v1/state.proto: its commands (new numbers in the
//     Command oneof; a request that may wait carries session, seq, wait,
//     ttl_ms, request_id, quota and secret_hash like Acquire) and its snapshot section (a new
//     repeated field of State). Never reuse a number, including the
//     reserved ones. Run proto/generate.sh.
//  2. fsm/semaphore.go: its kind in binding.go (before numKinds), a table
//     type registered in Machine.reset (primitives and sections), its
//     commands dispatched in Machine.Apply, and the table implementing
//     primitive (endSession, snapshot, restore) on the shared parts above;
//     checkHoldQuota before it grants or queues.
//     Tests beside it, and its state in the golden snapshot test.
//  3. proto/fenced/v1/fenced.proto: one service (a SemaphoreService), then
//     proto/generate.sh.
//  4. server/semaphore.go: the service handler: validate, propose the
//     command, and for a request that waits block on the server's waits as
//     server/lock.go does (wait keys are by name and session, so a
//     primitive whose names may collide with lock names must add its kind
//     to the key); register it in server.routes and add its read-only
//     procedures to the list of linearizable reads (server/forward.go).
//  5. client/semaphore.go: the SDK calls on a Session, with retries under
//     the same seq.
//  6. cmd/fenced/semaphore.go: the CLI command, registered in root.go.
//
// Keep it deterministic: no clock, no map iteration where the order is
// visible (sort), and a refused command changes nothing.
package fsm
