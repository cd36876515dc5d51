package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// The audit log rotates by size and keeps Keep rotated files; every line
// of every file is a whole entry.
func TestAuditLog_Rotates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := openAuditLog(AuditConfig{File: file, MaxBytes: 1000, Keep: 2}, "n1", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		a.record(auditEntry{Event: auditDenied, Identity: "app", Procedure: "/p", Target: fmt.Sprintf("k%03d", i), Outcome: "refused"})
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file + ".3"); !os.IsNotExist(err) {
		t.Fatalf("%s.3 exists (%v): Keep is 2", file, err)
	}
	var last string
	for _, f := range []string{file + ".2", file + ".1", file} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1000 {
			t.Fatalf("%s has %d bytes, above MaxBytes", f, st.Size())
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var e auditEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: line %q: %v", f, sc.Text(), err)
			}
			if e.Node != "n1" || e.Time.IsZero() || e.Target <= last {
				t.Fatalf("%s: entry %+v out of order (after %q) or without node and time", f, e, last)
			}
			last = e.Target
		}
		fh.Close()
	}
	if last != fmt.Sprintf("k%03d", n-1) {
		t.Fatalf("last entry %q, want the last one recorded", last)
	}
	// A nil log records nothing and does not fail.
	var none *auditLog
	none.record(auditEntry{})
	if err := none.close(); err != nil {
		t.Fatal(err)
	}
}
