package nativewire

import (
	"net"
	"time"
)

// WriteDeadline bounds the writes of one connection without a timer
// change per write: Extend moves the connection's write deadline to
// timeout from now only when the one already set is less than three
// quarters of timeout away. A write so starts with between 3/4 of timeout
// and all of it before it fails. (Setting the deadline on every write
// cost about 1 % of a busy server's CPU: each set re-arms a runtime
// timer.) It is used by one writer at a time.
type WriteDeadline struct {
	until time.Time
}

// Extend makes sure c's writes may block for at least 3/4 of timeout
// from now, and at most timeout; a timeout of zero or less leaves c's
// deadline alone.
func (w *WriteDeadline) Extend(c net.Conn, timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	now := time.Now()
	if w.until.Sub(now) >= timeout-timeout/4 {
		return nil
	}
	w.until = now.Add(timeout)
	return c.SetWriteDeadline(w.until)
}
