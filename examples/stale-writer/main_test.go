package main

import (
	"bytes"
	"strings"
	"testing"
)

// The example tells the story end to end: A's late write is rejected with
// 409 and the final value is A's write after it re-acquired.
func TestRun(t *testing.T) {
	stop, addr, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var out bytes.Buffer
	if err := run(&out, addr); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"409 Conflict, X-Required-Token:", `= "order 2 shipped by A"`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "AGAIN by A\" (") {
		t.Errorf("the stale write reached the data:\n%s", got)
	}
	t.Log("\n" + got)
}
