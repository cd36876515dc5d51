package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fenced certs init creates a CA once; issue makes node and client
// certificates; bad input is a usage error or a clear refusal.
func TestCerts_CLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, errOut, code := runFenced(t, "certs", "init", "--dir", dir)
	if code != 0 || !strings.HasPrefix(out, "created CA "+filepath.Join(dir, "ca.crt")) {
		t.Fatalf("certs init: exit %d %q %s", code, out, errOut)
	}
	if _, errOut, code := runFenced(t, "certs", "init", "--dir", dir); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second certs init: exit %d %s, want 1 and already exists", code, errOut)
	}
	out, errOut, code = runFenced(t, "certs", "issue", "--dir", dir, "--node", "n1", "--host", "db1.internal")
	if code != 0 || !strings.Contains(out, `issued node certificate`) {
		t.Fatalf("issue --node: exit %d %q %s", code, out, errOut)
	}
	out, errOut, code = runFenced(t, "certs", "issue", "--dir", dir, "--client", "app")
	if code != 0 || !strings.Contains(out, `issued client certificate`) {
		t.Fatalf("issue --client: exit %d %q %s", code, out, errOut)
	}
	for _, f := range []string{"ca.crt", "ca.key", "n1.crt", "n1.key", "app.crt", "app.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	for _, args := range [][]string{
		{"certs", "issue", "--dir", dir},
		{"certs", "issue", "--dir", dir, "--node", "n2", "--client", "x"},
		{"certs", "issue", "--dir", dir, "--client", "x", "--host", "h"},
		{"certs", "init", "--dir", t.TempDir(), "--validity", "0s"},
	} {
		if _, errOut, code := runFenced(t, args...); code != 2 {
			t.Errorf("%v: exit %d %s, want 2", args, code, errOut)
		}
	}
	if _, errOut, code := runFenced(t, "certs", "issue", "--dir", dir, "--node", "n1"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("issue n1 again: exit %d %s, want 1 and already exists", code, errOut)
	}
	if _, errOut, code := runFenced(t, "certs", "issue", "--dir", t.TempDir(), "--node", "n1"); code != 1 || !strings.Contains(errOut, "fenced certs init") {
		t.Errorf("issue without a CA: exit %d %s, want 1 pointing at fenced certs init", code, errOut)
	}
}
