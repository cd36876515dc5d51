package server

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Lock delay (fsm/lockdelay.go): the state machine keeps a lock in its
// delay until an EndLockDelay; the leader times the delay on its
// monotonic clock and proposes the end, stamped with its term, at most
// ExpiryInterval after it is due. Every node tracks the delays it applies
// the start of, but only the serving leader proposes ends; a new leader
// first arms every pending delay again from the state, in full from its
// takeover, so a delay is never cut short by a change of leader (it may
// last up to one delay longer).

// delayDeadline is the end of one lock's delay on this node's clock.
type delayDeadline struct {
	after    fence.Token
	end      time.Time
	proposed time.Time // when an end was proposed; zero if none
}

// lockDelays is the in-memory table of pending lock delays, by name.
type lockDelays struct {
	clock fence.Clock
	mu    sync.Mutex
	table map[string]*delayDeadline
}

func newLockDelays(clock fence.Clock) *lockDelays {
	return &lockDelays{clock: clock, table: make(map[string]*delayDeadline)}
}

func (d *lockDelays) start(name string, after fence.Token, length time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.table[name] = &delayDeadline{after: after, end: d.clock.Now().Add(length)}
}

func (d *lockDelays) ended(name string, after fence.Token) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if dd := d.table[name]; dd != nil && dd.after == after {
		delete(d.table, name)
	}
}

// reset replaces the table with pending, each in full from now: after a
// takeover or a restored snapshot.
func (d *lockDelays) reset(pending []fsm.PendingDelay) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.table = make(map[string]*delayDeadline, len(pending))
	for _, p := range pending {
		d.table[p.Name] = &delayDeadline{after: p.After, end: now.Add(p.Length)}
	}
}

// due marks and returns, by name, the delays that have run out and whose
// end was not proposed in the last retryExpiryAfter.
func (d *lockDelays) due() []fsm.PendingDelay {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	var out []fsm.PendingDelay
	for name, dd := range d.table {
		if now.Before(dd.end) || (!dd.proposed.IsZero() && now.Sub(dd.proposed) < retryExpiryAfter) {
			continue
		}
		dd.proposed = now
		out = append(out, fsm.PendingDelay{Name: name, After: dd.after})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var _ fsm.DelayObserver = (*events)(nil)

// LockDelayStarted implements fsm.DelayObserver.
func (e *events) LockDelayStarted(name string, after fence.Token, length time.Duration) {
	e.delays.start(name, after, length)
	e.metrics.lockDelays.Inc()
	e.debug("lock delay", slog.String("name", name), slog.Uint64("after_token", uint64(after)), slog.Duration("delay", length))
}

// LockDelayEnded implements fsm.DelayObserver.
func (e *events) LockDelayEnded(name string, after fence.Token) {
	e.delays.ended(name, after)
}

// rearmDelays arms every pending delay of the state in full from now, as a
// new leader must.
func (s *Server) rearmDelays() {
	var pending []fsm.PendingDelay
	s.sm.read(func(m *fsm.Machine) { pending = m.PendingDelays() })
	s.delays.reset(pending)
}

// endDueDelays proposes the end of every delay that ran out, stamped with
// term; called on each tick of the leader's expiry loop. It reports false
// when ctx ended.
func (s *Server) endDueDelays(ctx context.Context, term uint64, props *leaderProposals) bool {
	for _, d := range s.delays.due() {
		cmd := &statev1.Command{Op: &statev1.Command_EndLockDelay{EndLockDelay: &statev1.EndLockDelay{Name: d.Name, AfterToken: uint64(d.After), Term: term}}}
		if !props.propose(ctx, cmd, "end lock delay", "name", d.Name) {
			return false
		}
	}
	return true
}

// lockDelayMs is the lock delay of an acquire: the one it asks for, or the
// server's default.
func (s *Server) lockDelayMs(asked *int64) int64 {
	if asked != nil {
		return *asked
	}
	return s.cfg.LockDelay.Milliseconds()
}

func validateLockDelayMs(asked *int64) error {
	if asked == nil {
		return nil
	}
	if err := fence.ValidateLockDelayMillis(*asked); err != nil {
		return fmt.Errorf("lock_delay_ms (unset: the server's default): %w", err)
	}
	return nil
}

func validateLockDelayConfig(d time.Duration) error {
	if d < 0 || d > fence.MaxLockDelay {
		return fmt.Errorf("lock delay %v is out of range; want 0 (off) to %v", d, fence.MaxLockDelay)
	}
	return nil
}
