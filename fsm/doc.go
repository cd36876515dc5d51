// Package fsm is fenced's replicated state machine: sessions with TTLs,
// exclusive locks, counting semaphores (semaphore.go), leader elections
// (election.go), read/write locks (rwlock.go) with FIFO wait queues, work
// queues with fenced claims (queue.go), the fenced kv, the one token counter
// of the cluster and the tables that de-duplicate retried requests.
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
// A primitive (the exclusive lock, the semaphore) is built from parts every
// primitive shares; each lives in its own file:
//
//   - session binding (binding.go, session.go): a grant hangs off a
//     session. A primitive binds the objects a session holds and waits for
//     (session.hold(kind, name), .wait); closing or expiring the session
//     calls every primitive's endSession, which releases them in name order
//     (binding.end). Machine.requestSession resolves a request's session,
//     creating a per-grant one for session 0, and checks the hash of the
//     secret the request presented (secret.go): only a session's creator
//     knows its secret, and the state keeps only its SHA-256.
//   - token issue and the live-grant index (tokens.go, livegrants.go):
//     one counter for the whole cluster. Check tokens.exhausted (the error
//     is tokens.overflow) before changing anything, then issue every grant
//     with Machine.issueGrant(kind, name, scope, session, now): it takes
//     tokens.next, registers the grant in the live-grant index by token
//     with its fence.Kind and scope, and returns the fence.Grant to push.
//     End every grant with Machine.endGrant(token, reason): it unregisters
//     it and pushes Observer.Released. The fenced kv accepts a token only
//     while the index holds it with a scope covering the key
//     (fence.ScopeCovers), so a grant left in the index is authority that
//     should have ended. tokens.next keeps
//     the token reservation (reservation.go): before it issues the first
//     token past the reserved end it extends the reservation by a block and
//     tells the node-local hook (SetReservationHook), which records the end
//     durably; a new leader's ReserveTokens restarts the counter above its
//     recorded end, so a log that lost its last grants never reissues their
//     tokens. The Machine does no I/O: the hook is the server's.
//   - FIFO waiters with push (waitqueue.go, binding.go): a waitQueue per
//     object; Machine.enqueue (with the fence.Kind the waiter asks for),
//     Machine.leaveQueue and Machine.promote (which issues the first
//     waiter's grant with issueGrant) keep the queue, the session binding
//     and the live index in step. Every grant is pushed with
//     Observer.Granted (the grant carries its Kind) and every wait that
//     ends without one with Observer.WaitEnded(kind, name, session): the
//     server wakes the call that waits with them, keyed by (kind, name,
//     session).
//   - expiry (expiry.go): ExpireSession and NewLeader. A primitive adds
//     nothing: an expired session ends like a closed one.
//   - lock delay (lockdelay.go) and renewal (renew.go), the exclusive
//     lock's so far: a lockDelay kept beside a grant holds the name free
//     after an expiry or revocation until the leader's term-stamped
//     EndLockDelay; RenewGrant sets a holding session's TTL under its
//     secret, never granting. A primitive that wants a delay keeps a
//     lockDelay per object (pending, setWaiter, grantedTo, snapshot,
//     restore and check do not depend on the lock) and starts and ends it
//     as lockTable.startDelay and endDelay do.
//   - request de-duplication (dedup.go): each session remembers the results
//     of its newest requests by seq (replies.get, .put, .promote), so a
//     retried request is answered with its original result. A primitive
//     other than the lock remembers its requests under a name of its own
//     (rwReplyName: "\x00read/write lock\x00" + name), so a seq is never
//     answered with the result of another primitive's object of the same
//     name.
//   - acquire and release (acquire.go, withdraw.go): Machine.startAcquire
//     does what every acquire starts with (name, issuer, tokens left,
//     session, secret, a retried seq), and Machine.release every release
//     (the owner check, a retried seq, withdrawals of an acquire a caller
//     gave up on, by seq or per-grant request id) on a primitive's
//     releaser: releaseOwn, undoGrant, undoWait, heldByOther, replyName.
//   - snapshot (snapshot.go, primitive.go): the Machine writes the counters
//     and the sessions; each section writes and restores its own fields of
//     State.
//   - the format version (format.go): every entry and snapshot carries
//     one; Decode and Restore refuse a version this build does not
//     apply (ErrFormatVersion), so the node stops instead of skipping,
//     and refuse alike a field, command kind or enum value this build
//     does not know anywhere in an entry or snapshot (checkKnown), so
//     what a newer release adds stops an older member without a version
//     bump. A primitive adds nothing, and follows one rule: a new field's
//     zero value means what the command meant before it (an older
//     leader's entries leave it unset), and a change of what an existing
//     field, kind or value means gets a new one instead (or FormatVersion
//     goes up): an older member cannot tell a change of meaning.
//   - restore into a new issuer epoch (reissue.go): Restored keeps the kv,
//     the latches and the rate limiters, and drops every session (so
//     every primitive's grants and waiters); a primitive whose state
//     outlives sessions must say what a restore keeps of it there.
//   - per-owner quotas (quota.go): a session records the identity it is
//     charged to, and its bindings count what that owner holds and waits
//     for over every primitive; a request carries the limits (a Quota) and
//     is refused with a QuotaError at one (checkSessionQuota in
//     createSession, checkHoldQuota before a new grant or place in a queue).
//   - pages (page.go): LocksAfter and SessionsAfter read a bounded page
//     after a cursor; LocksVisible and SessionsVisible do for a reader
//     who may see only some names, counting what they hide.
//   - signing keys (keys.go): the cluster's Ed25519 keys, whose seeds the
//     proposer generates (RotateKeys). A primitive does nothing with them:
//     the server signs each grant it hands a holder (Server.handOut).
//
// # How to add a primitive
//
// A primitive is one file per layer. For a semaphore:
//
//  1. Its grant kind: a fence.Kind constant in grant.go (KindPermit; lock,
//     read, write, permit, leader and claim exist) and its scope: the name
//     for a lock, read/write lock or election, "name/slot" for a permit,
//     "queue/item" for a claim. fence.ScopeCovers is the one rule of what a
//     scope covers; never compare scopes any other way.
//  2. proto/fenced/state/v1/state.proto: its commands (new numbers in the
//     Command oneof; a request that may wait carries session, seq, wait,
//     ttl_ms, request_id, quota and secret_hash like Acquire) and its
//     snapshot section (a new repeated field of State). Never reuse a
//     number, including the reserved ones. Run proto/generate.sh.
//  3. fsm/semaphore.go: its binding kind in binding.go (before numKinds), a
//     table type registered in Machine.reset (primitives and sections), its
//     commands dispatched in Machine.Apply, and the table implementing
//     primitive (endSession, snapshot, restore, eachGrant) on the shared
//     parts above: checkHoldQuota before it grants or queues; every grant
//     from Machine.issueGrant (or Machine.promote for a waiter, which calls
//     it) with its fence.Kind and scope; every end of a grant (release,
//     expiry, revoke, session end) through Machine.endGrant; waiters queued
//     with Machine.enqueue and the kind they ask for. eachGrant lists every
//     grant the table holds with the same kind, name, scope, session and
//     issuedAt it was issued with: restore rebuilds the live index from it
//     (the index is never in the snapshot) and checkInvariants compares the
//     two. Tests beside it, and its state in the golden snapshot test.
//  4. proto/fenced/v1/fenced.proto: one service (a SemaphoreService), then
//     proto/generate.sh. Its grants are fenced.v1.Grant with kind and scope
//     (server/convert.go grantProto).
//  5. server/semaphore.go: the service handler: validate, propose the
//     command, and for a request that waits call Server.await
//     (server/waits.go) with waitKey{kind, name, session}, a look function
//     reading whether the session holds the grant or is still queued, and
//     the command that cancels the wait (server/lock.go's wait is the
//     example). Waits are keyed by kind, so a semaphore "orders" never wakes
//     a waiter of the lock "orders". The response that hands a grant to
//     its holder (granted at once, pushed to a waiter, retried) builds it
//     with Server.handOut(g), which signs kind, scope, token, issuer and
//     issued_at with the cluster key (server/keys.go) — one call, nothing
//     else to do; a grant shown to anyone else (describe, status) uses
//     grantProto and is never signed. Register it in server.routes and
//     add its read-only procedures to the list of linearizable reads
//     (server/forward.go).
//  6. client/semaphore.go: the SDK calls on a Session, with retries under
//     the same seq; grants converted with grantOf (client/mutex.go).
//  7. cmd/fenced/semaphore.go: the CLI command, registered in root.go;
//     --json prints grants with printGrant (kind and scope included).
//
// Keep it deterministic: no clock, no map iteration where the order is
// visible (sort), and a refused command changes nothing.
package fsm
