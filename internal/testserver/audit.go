package testserver

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// AuditHas reports whether the audit log at path (fenced serve
// --audit-log) has an entry with every field of want.
func AuditHas(t testing.TB, path string, want map[string]string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e map[string]string
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		ok := true
		for k, v := range want {
			ok = ok && e[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}
