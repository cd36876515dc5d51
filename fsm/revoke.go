package fsm

import (
	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// revoke is an administrator's force-revoke of a lock: the session holding
// it ends as if it expired (reason Revoked), so every grant and wait of
// that session ends and the lock goes to its first waiter with the next
// token. A lock that is free, or held under another token than a non-zero
// r.token, is left alone (Ignored). It needs no secret: the server lets
// only an administrator propose it.
func (t *lockTable) revoke(r *statev1.Revoke, now int64) Result {
	if err := fence.ValidateName(r.GetName()); err != nil {
		return Result{Err: err}
	}
	l := t.byName[r.GetName()]
	if l == nil || l.holder == 0 || (r.GetToken() != 0 && uint64(l.token) != r.GetToken()) {
		return Result{Ignored: true}
	}
	g := t.grantOf(l)
	res := t.m.endSession(l.holder, Revoked, now)
	res.Grant = g
	return res
}
