// Package client is the Go SDK of fenced: it creates sessions and keeps
// them alive, acquires locks with fencing tokens, and tells the holder the
// moment it can no longer trust a grant.
//
// # Usage
//
//	c, err := client.New([]string{"127.0.0.1:7700"})
//	if err != nil { ... }
//	defer c.Close()
//
//	s, err := c.NewSession(ctx, client.WithTTL(15*time.Second))
//	if err != nil { ... }
//	defer s.Close(context.Background())
//
//	m := client.NewMutex(s, "reports/daily")
//	if err := m.Lock(ctx); err != nil { ... } // waits in the server's FIFO queue
//	defer m.Unlock(context.Background())
//
//	// Do the work under the grant's context and send its token with every
//	// write; the resource rejects a write whose token is older than one it
//	// has already seen.
//	err = store.Write(m.Context(), "reports/daily", data, m.Token())
//
// For one grant with a TTL of its own and no keep-alive, use Client.Acquire
// and the Lease it returns. For up to N holders at once, each with its
// own token and slot, use NewSemaphore (docs/semaphore.md).
//
// For shared readers and one writer, use NewRWMutex: a fair read/write lock
// whose one FIFO queue keeps a stream of readers from starving a writer
// (docs/rwlock.md).
//
// # What the SDK promises, and what not
//
// A session's validity is measured here, on the local monotonic clock,
// from just before the request that created or last renewed it was sent:
// ValidUntil = sent + TTL - margin. The server keeps a session for at least
// TTL after it received that request, so, with clocks that run at about
// the same rate, the client gives a session up before the server can
// expire it and hand its locks to someone else. The client renews every
// TTL/3 over one KeepAlive stream per Client. If renewals stop being
// confirmed, the session first enters jeopardy (see Session.Jeopardy and
// StateJeopardy) and, when ValidUntil passes, is lost: Done closes and the
// Context of every grant is cancelled, at ValidUntil even when the network
// is stuck. When the server says the session is gone, it is lost at once.
// An uncertain session counts as lost; so does a grant whose reply arrives
// after its validity ran out (the SDK releases it instead of returning it).
//
// All of this is a liveness signal, never a safety guarantee. A process
// that is paused (GC, SIGSTOP, VM migration) or a clock that misbehaves can
// make a holder act after it lost its grant without having noticed, and a
// cancelled context does not undo a write already on its way. What keeps
// such a write out is the fencing token: every grant carries one that is
// greater than every token issued before it, and a resource that compares
// tokens atomically with the write rejects the stale one. Send Token with
// every protected write.
//
// # Ownership
//
// A session's id is no secret (Status lists them); its secret is. The SDK
// generates a random 128-bit secret for every session it creates (and for
// the session of every Lease), sends it with each request of the session
// and never shows it unless asked (Session.Secret, Lease.Secret): the
// server refuses a renewal, release, close or acquire for a session
// without its secret, with an error wrapping fence.ErrNotOwner. When an
// administrator force-revokes a lock (Client.Revoke, fenced revoke), the
// server ends its holder's session and tells that session's KeepAlive
// stream at once: the session is lost with ErrRevoked and the Context of
// every grant of it is cancelled.
//
// # Transport
//
// A Client keeps one HTTP/2 connection per endpoint it uses for its
// calls, and one more for its KeepAlive stream. Lock acquires and releases
// (of a Mutex or a Lease) and kv puts go over one LockService.Pipeline
// stream per endpoint: calls from any number of goroutines are sent
// without waiting for each other and packed into few messages, and each
// answer is matched to its call. A call whose context ends before it was
// sent is not sent; one already sent is cancelled on the server. Calls of
// one stream run concurrently on the server, so a call sent after another
// may be applied before it: an acquire given up on is therefore undone by
// a withdrawal, which the server orders after it (see Mutex.Lock), never
// by a plain release. Other calls (sessions, status, reads,
// cluster administration) are one request each on the same connections.
// Renewals of all sessions go over one KeepAlive stream, many per message,
// on a connection of its own: a partition silences a TCP connection
// without breaking it, so when renewals stop being answered the Client
// abandons the stream together with its connection and opens both anew,
// on the next endpoint. With WithHTTPClient, every stream and call uses
// the given client and its transport decides the connections.
//
// Connections are cleartext HTTP/2 (h2c) unless WithTLS is given: then
// HTTP/2 over TLS, verifying the servers against the config's RootCAs and
// presenting its client certificate if it has one (LoadTLS reads them
// from files). A server with an auth file needs a bearer token on every
// call: WithBearerToken sends it; a call without it fails with
// connect.CodeUnauthenticated, and a call its identity may not make with
// an error wrapping fence.ErrPermissionDenied.
//
// # Retries
//
// Every call that changes state carries an id the server de-duplicates: a
// session's requests carry the session and a sequence number, a new
// session or a Lease a random request id. A call that times out or fails
// on the network is retried with the same id, on the next endpoint if need
// be, so the server applies it once and a retry returns the original
// result. Retries go on until the caller's context ends (and, for a
// session's calls, until the session is lost), so give contexts a deadline
// to bound them.
package client
