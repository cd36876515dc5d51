// Package server is the fenced server: the API (gRPC and JSON over HTTP from
// one protobuf definition, via Connect) on top of the replicated state
// machine (package fsm) and its Raft node (package raftstore).
//
// Writes are proposed to Raft and answered after they are committed and
// applied. Waiting acquires are queued in the state machine and the grant is
// pushed to the waiting call when it is applied; nothing polls. The leader
// keeps every session's lease in memory on its monotonic clock, renews it on
// keep-alives and proposes an expiry command, stamped with its term, when a
// lease runs out. A new leader first applies every earlier entry, records
// its leadership in the log, then restarts every session's full TTL from its
// takeover: deadlines move later, never earlier (docs/design.md §3).
//
// What a client can make the server hold is bounded (Limits): connection
// timeouts and caps (limits.go, listener.go), per-source quotas on
// sessions, grants and waiters enforced by the state machine, and a
// session creation rate (quota.go), and pages for the read calls that
// could return the whole state (page.go). docs/design.md §6 lists them.
//
// With Config.AuthFile every API call needs a bearer token of an identity
// in the file (auth.go), whose roles must grant the permission the call
// needs on its name (authz.go: one table for the interceptor, the
// Pipeline's calls and the kv's HTTP API); authentication failures,
// denials and admin actions go to the audit log (audit.go).
//
// Each node records the end of the token reservation on its disk
// (DataDir/token-reservation, reservation.go) before a token in it is
// handed out, and a new leader restarts the counter above its recorded end,
// so a log that lost its last grants never reissues their tokens
// (docs/design.md §2). A node whose log cannot be applied (an entry that
// does not decode, a reservation that cannot be recorded) stops, and the
// server with it; Err says why.
package server
