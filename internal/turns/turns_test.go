package turns

import "testing"

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Waiters of one name get their turn in arrival order; one that leaves
// out of turn hands nothing on, and names are independent.
func TestQueue_FirstComeFirstServed(t *testing.T) {
	var q Queue
	a, leaveA := q.Join("x")
	b, leaveB := q.Join("x")
	c, leaveC := q.Join("x")
	other, leaveOther := q.Join("y")
	if !isClosed(a) || isClosed(b) || isClosed(c) || !isClosed(other) {
		t.Fatalf("heads: a %v b %v c %v other %v; want a and other", isClosed(a), isClosed(b), isClosed(c), isClosed(other))
	}
	leaveB() // a waiter behind the head gives up: nothing moves
	if isClosed(c) {
		t.Fatal("c became head while a still is")
	}
	leaveA()
	if !isClosed(c) {
		t.Fatal("c is not head after a left")
	}
	leaveC()
	leaveOther()
	if len(q.q) != 0 {
		t.Fatalf("queues left behind: %v", q.q)
	}
	d, leaveD := q.Join("x")
	if !isClosed(d) {
		t.Fatal("a new waiter on an empty queue is not head")
	}
	leaveD()
}
