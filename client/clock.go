package client

import (
	"time"

	fence "github.com/fenced-dev/fenced"
)

// TimerClock is a fence.Clock that also runs timers. A clock given to
// WithClock that implements it runs all of the Client's timers: the
// validity and jeopardy deadlines of sessions and TTL locks, and the renewal
// schedule. A fake TimerClock lets a test move time by hand.
type TimerClock interface {
	fence.Clock
	// AfterFunc calls f in its own goroutine once d has passed on this
	// clock, unless the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer started by TimerClock.AfterFunc.
type Timer interface {
	// Stop prevents the timer from firing. It returns false if the timer
	// already fired or was stopped.
	Stop() bool
}

// clock is the time source of a Client.
type clock struct {
	fence.Clock
	timers TimerClock // nil: timers run on the system clock
}

func newClock(c fence.Clock) clock {
	if c == nil {
		return clock{Clock: fence.SystemClock{}}
	}
	tc, _ := c.(TimerClock)
	return clock{Clock: c, timers: tc}
}

// afterFunc runs f after d. Callers re-read Now when f runs: a clock
// without timers is only consulted then.
func (c clock) afterFunc(d time.Duration, f func()) Timer {
	if c.timers != nil {
		return c.timers.AfterFunc(d, f)
	}
	return time.AfterFunc(max(d, 0), f)
}
