package nativewire

import (
	"net"
	"testing"
	"time"
)

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// Extend sets the deadline on the first write, leaves it while three
// quarters of the timeout remain, and moves it once less does; every
// write it lets through has at least 3/4 of the timeout.
func TestWriteDeadline_ExtendsOnlyWhenLow(t *testing.T) {
	const timeout = 400 * time.Millisecond
	c := &deadlineConn{}
	var w WriteDeadline
	start := time.Now()
	for range 3 {
		if err := w.Extend(c, timeout); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.set) != 1 || c.set[0].Before(start.Add(timeout)) {
		t.Fatalf("three quick writes set deadlines %v, want one, %v from the first", c.set, timeout)
	}
	time.Sleep(timeout/4 + 20*time.Millisecond)
	now := time.Now()
	if err := w.Extend(c, timeout); err != nil {
		t.Fatal(err)
	}
	if len(c.set) != 2 || c.set[1].Before(now.Add(timeout)) {
		t.Fatalf("after a quarter of the timeout the deadlines are %v, want a second one %v from %v", c.set, timeout, now)
	}
	if err := w.Extend(c, 0); err != nil || len(c.set) != 2 {
		t.Fatalf("a zero timeout set a deadline: %v %v", c.set, err)
	}
}
