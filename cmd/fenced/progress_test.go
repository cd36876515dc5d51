package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The progress line rewrites itself in place and clears itself; off a
// terminal it writes nothing.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progressLine{w: &buf}
	p.update("check: %ds ops=%d", 1, 12345)
	p.update("check: %ds ops=%d", 2, 7)
	p.clear()
	want := "\rcheck: 1s ops=12345" + "\rcheck: 2s ops=7" + "    " + "\r" + strings.Repeat(" ", 15) + "\r"
	if got := buf.String(); got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}

	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, asJSON := range []bool{false, true} {
		q := newProgress(f, asJSON)
		q.update("x")
		q.clear()
	}
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Fatalf("a progress line off a terminal wrote %d bytes", st.Size())
	}
}
