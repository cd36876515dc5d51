package pggrant

import "testing"

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Waiters of one name get their turn in arrival order; one that leaves
// out of turn hands nothing on, and names are independent.
func TestTurns_ArrivalOrder(t *testing.T) {
	var tu turns
	a, leaveA := tu.join("x")
	b, leaveB := tu.join("x")
	c, leaveC := tu.join("x")
	other, leaveOther := tu.join("y")
	if !closed(a) || closed(b) || closed(c) || !closed(other) {
		t.Fatalf("turns after joining: a %v b %v c %v other %v; want a and the other name's first", closed(a), closed(b), closed(c), closed(other))
	}
	leaveB() // gives up while waiting: c is still behind a
	if closed(c) {
		t.Fatal("c got the turn when b, not the head, left")
	}
	leaveA()
	if !closed(c) {
		t.Fatal("c did not get the turn when the head left")
	}
	leaveC()
	leaveOther()
	if len(tu.q) != 0 {
		t.Fatalf("queues left behind: %v", tu.q)
	}
	d, leaveD := tu.join("x")
	if !closed(d) {
		t.Fatal("a waiter on an empty queue is not the head")
	}
	leaveD()
}
