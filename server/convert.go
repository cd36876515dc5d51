package server

import (
	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func grantProto(g fence.Grant) *fencedv1.Grant {
	if g.Token == 0 {
		return nil
	}
	return &fencedv1.Grant{
		Name:           g.Name,
		Kind:           string(g.Kind),
		Scope:          g.Scope,
		Token:          uint64(g.Token),
		Issuer:         g.Issuer,
		Session:        g.Session,
		TtlMs:          g.TTL.Milliseconds(),
		IssuedAtUnixMs: g.IssuedAt.UnixMilli(),
	}
}

func lockProto(info fsm.LockInfo) *fencedv1.LockInfo {
	out := &fencedv1.LockInfo{Name: info.Name, Holder: grantProto(info.Holder)}
	for _, w := range info.Waiters {
		out.Waiters = append(out.Waiters, &fencedv1.Waiter{Session: w})
	}
	delayProto(info.Delay, out)
	return out
}

// delayProto fills in the lock delay of out (docs/lock-delay.md).
func delayProto(d fsm.DelayInfo, out *fencedv1.LockInfo) {
	out.LockDelayMs = d.Holder.Milliseconds()
	if d.Pending {
		out.Delayed, out.DelayMs = true, d.Length.Milliseconds()
		out.DelayUntilUnixMs = d.Since.Add(d.Length).UnixMilli()
	}
}

func releaseProto(r fsm.ReleaseResult) fencedv1.ReleaseResult {
	switch r {
	case fsm.Released:
		return fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED
	case fsm.AlreadyReleased:
		return fencedv1.ReleaseResult_RELEASE_RESULT_ALREADY_RELEASED
	case fsm.NotOwned:
		return fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED
	}
	return fencedv1.ReleaseResult_RELEASE_RESULT_UNSPECIFIED
}
