package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Lock delay (docs/design.md §3, as in Chubby and Consul): a grant may carry
// a delay, asked for by the acquire that took it. When the grant's session
// expires or is revoked (never when the lock is released or the session is
// closed), the lock grants nothing for that long: a holder that was cut
// off mid-write, at a resource that cannot check tokens, has that much
// longer to stop before the next holder starts. It is a mitigation, not a
// safety mechanism: only the token check at the resource keeps a late
// write out.
//
// The Machine reads no clock, so it never decides that a delay is over:
// the leader times it on its own clock and proposes EndLockDelay, stamped
// with its term and the token of the grant whose end started the delay. An
// end from an older term than the newest leadership applied is ignored (a
// new leader arms every pending delay again, in full, from the state), and
// so is one for another delay of the same lock.

// lockDelay is a lock's delay: the one its current grant asked for, the
// ones its waiters asked for, and the pending delay, if any.
//
// Nearly every lock has neither a waiter that asked for a delay nor a
// pending delay, so those are kept apart (more), made on first use: a
// lock costs the 16 bytes of its grant's delay rather than 48.
type lockDelay struct {
	holderMs int64 // the current grant's delay; 0: none
	more     *delayMore
}

// delayMore is the part of a lockDelay a lock rarely uses; a nil one is
// all zero.
type delayMore struct {
	waiters map[uint64]int64 // queued session -> the delay its acquire asked for, when not 0
	after   fence.Token      // the grant whose end started the pending delay; 0: none
	ms      int64            // the pending delay's length
	sinceMs int64            // when the pending delay started (proposer's wall clock, display only)
}

// rest returns the delay's rarely used part for reading: a zero one if it
// was never made.
func (d *lockDelay) rest() *delayMore {
	if d.more == nil {
		return &noDelayMore
	}
	return d.more
}

// noDelayMore is the rest of a delay that never had one; nothing changes it.
var noDelayMore delayMore

// change returns the delay's rarely used part for a change, made first if
// need be.
func (d *lockDelay) change() *delayMore {
	if d.more == nil {
		d.more = &delayMore{}
	}
	return d.more
}

// pending reports a lock in its delay: it has no holder and grants nothing.
func (d *lockDelay) pending() bool { return d.rest().after != 0 }

// DelayInfo describes a lock's delay.
type DelayInfo struct {
	// Holder is the lock delay of the current grant (0: none).
	Holder time.Duration
	// Pending reports that the lock is in its delay after the expiry or
	// revocation of the grant with token After; it grants nothing until
	// the leader ends the delay.
	Pending bool
	// After is the token of that grant.
	After fence.Token
	// Length is the pending delay's length.
	Length time.Duration
	// Since is the leader's wall clock when the pending delay started
	// (display only).
	Since time.Time
}

func (d *lockDelay) info() DelayInfo {
	i := DelayInfo{Holder: msDuration(d.holderMs)}
	if r := d.rest(); d.pending() {
		i.Pending, i.After, i.Length, i.Since = true, r.after, msDuration(r.ms), time.UnixMilli(r.sinceMs).UTC()
	}
	return i
}

// PendingDelay is a lock in its delay, for the leader to time its end.
type PendingDelay struct {
	// Name is the lock.
	Name string
	// After is the token of the grant whose end started the delay; the
	// EndLockDelay that ends it must carry it.
	After fence.Token
	// Length is the delay.
	Length time.Duration
}

// DelayObserver is an optional interface of an Observer that times lock
// delays: its methods are called, like the Observer's, inside Apply.
type DelayObserver interface {
	// LockDelayStarted is called when lock name enters a delay of length
	// after the grant with token after ended by expiry or revocation.
	LockDelayStarted(name string, after fence.Token, length time.Duration)
	// LockDelayEnded is called when that delay ends.
	LockDelayEnded(name string, after fence.Token)
}

func validateLockDelay(ms int64) error { return fence.ValidateLockDelayMillis(ms) }

// setWaiterDelay records the delay the queued acquire of session sid asked
// for. An entry of a session that left the queue is never read: every
// enqueue sets it again first, and the snapshot writes only queued ones.
func (d *lockDelay) setWaiter(sid uint64, ms int64) {
	switch {
	case ms != 0:
		c := d.change()
		if c.waiters == nil {
			c.waiters = make(map[uint64]int64)
		}
		c.waiters[sid] = ms
	case d.rest().waiters != nil:
		delete(d.more.waiters, sid)
	}
}

// grantedTo makes the delay of session sid's queued acquire the delay of
// the grant it was just promoted to.
func (d *lockDelay) grantedTo(sid uint64) {
	d.holderMs = d.rest().waiters[sid]
	if d.holderMs != 0 {
		delete(d.more.waiters, sid)
	}
}

// startDelay is called when the grant of l with token after ended for
// reason: if the grant asked for a delay and ended by expiry or
// revocation, l enters its delay and startDelay reports true (the caller
// then promotes no waiter).
func (t *lockTable) startDelay(l *lock, after fence.Token, reason EndReason, now int64) bool {
	ms := l.delay.holderMs
	l.delay.holderMs = 0
	if ms == 0 || (reason != Expired && reason != Revoked) {
		return false
	}
	c := l.delay.change()
	c.after, c.ms, c.sinceMs = after, ms, now
	if o, ok := t.m.obs.(DelayObserver); ok {
		o.LockDelayStarted(l.name, after, msDuration(ms))
	}
	return true
}

// endDelay applies EndLockDelay: the delay that followed the grant with
// e.after_token ends and the lock goes to its first waiter.
func (t *lockTable) endDelay(e *statev1.EndLockDelay, now int64) Result {
	if err := fence.ValidateName(e.GetName()); err != nil {
		return Result{Err: err}
	}
	if e.GetTerm() < t.m.leaderTerm {
		return Result{Ignored: true}
	}
	l := t.byName[e.GetName()]
	if l == nil || !l.delay.pending() || uint64(l.delay.more.after) != e.GetAfterToken() {
		return Result{Ignored: true}
	}
	c := l.delay.more
	after := c.after
	c.after, c.ms, c.sinceMs = 0, 0, 0
	if o, ok := t.m.obs.(DelayObserver); ok {
		o.LockDelayEnded(l.name, after)
	}
	t.grantNext(l, now)
	return Result{}
}

// PendingDelays returns every lock in its delay, by name: a new leader
// arms their ends from them.
func (m *Machine) PendingDelays() []PendingDelay {
	// The few pending ones are sorted, not every lock's name: a new
	// leader of a million locks asks for them.
	var out []PendingDelay
	for name, l := range m.locks.byName {
		if d := &l.delay; d.pending() {
			out = append(out, PendingDelay{Name: name, After: d.more.after, Length: msDuration(d.more.ms)})
		}
	}
	slices.SortFunc(out, func(a, b PendingDelay) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// snapshotDelay writes l's delay into pl.
func (d *lockDelay) snapshot(l *lock, pl *statev1.Lock) {
	pl.LockDelayMs = d.holderMs
	r := d.rest()
	pl.DelayAfterToken, pl.DelayMs, pl.DelaySinceUnixMs = uint64(r.after), r.ms, r.sinceMs
	for _, w := range l.queue.list {
		if ms := r.waiters[w.session]; ms != 0 {
			pl.WaiterDelays = append(pl.WaiterDelays, &statev1.WaiterDelay{Session: w.session, LockDelayMs: ms})
		}
	}
}

// restore reads l's delay from pl; l's holder and queue are restored
// already. The rules of a reachable state are check's (run after the
// restore); restore refuses what only a snapshot can get wrong: a waiter's
// delay for a session that does not wait, or listed twice.
func (d *lockDelay) restore(l *lock, pl *statev1.Lock) error {
	d.holderMs = pl.GetLockDelayMs()
	if pl.GetDelayAfterToken() != 0 || pl.GetDelayMs() != 0 || pl.GetDelaySinceUnixMs() != 0 {
		c := d.change()
		c.after, c.ms, c.sinceMs = fence.Token(pl.GetDelayAfterToken()), pl.GetDelayMs(), pl.GetDelaySinceUnixMs()
	}
	for _, wd := range pl.GetWaiterDelays() {
		if !l.queue.has(wd.GetSession()) {
			return fmt.Errorf("lock %q has a lock delay for session %d, which does not wait for it", l.name, wd.GetSession())
		}
		if _, dup := d.rest().waiters[wd.GetSession()]; dup {
			return fmt.Errorf("lock %q lists the lock delay of session %d twice", l.name, wd.GetSession())
		}
		if err := validateLockDelay(wd.GetLockDelayMs()); err != nil || wd.GetLockDelayMs() == 0 {
			return fmt.Errorf("lock %q: waiter %d: lock delay %dms is outside 1..%dms", l.name, wd.GetSession(), wd.GetLockDelayMs(), fence.MaxLockDelay.Milliseconds())
		}
		d.setWaiter(wd.GetSession(), wd.GetLockDelayMs())
	}
	return nil
}

// check reports a delay no sequence of commands could reach: a grant's
// delay out of range or without a grant, a pending delay on a held lock,
// after a token not issued yet, or of a length out of range.
func (d *lockDelay) check(l *lock, last fence.Token) error {
	max := fence.MaxLockDelay.Milliseconds()
	r := d.rest()
	switch {
	case d.holderMs < 0 || d.holderMs > max:
		return broken("lock %q has a lock delay of %dms, outside 0..%dms", l.name, d.holderMs, max)
	case d.holderMs != 0 && l.holder == 0:
		return broken("lock %q has a lock delay but no holder", l.name)
	case !d.pending() && (r.ms != 0 || r.sinceMs != 0):
		return broken("lock %q has a delay length but no pending delay", l.name)
	case !d.pending():
		return nil
	case l.holder != 0:
		return broken("lock %q is held and in its delay", l.name)
	case r.after > last:
		return broken("lock %q is in the delay after token %d, above the last token %d", l.name, r.after, last)
	case r.ms <= 0 || r.ms > max:
		return broken("lock %q is in a delay of %dms, outside 1..%dms", l.name, r.ms, max)
	}
	return nil
}
