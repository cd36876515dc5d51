package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fenced man writes one page per command, each a page man can render,
// with the command's flags.
func TestMan_PagePerCommand(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runFenced(t, "man", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(pages) < 20 || !strings.Contains(out, "wrote") {
		t.Fatalf("wrote %d pages (%q), want one per command", len(pages), out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "fenced-cluster-transfer-leader.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), ".SH SYNOPSIS") || !strings.Contains(string(b), `\-\-endpoints`) {
		t.Errorf("fenced-cluster-transfer-leader.1 lacks its synopsis or --endpoints:\n%s", b)
	}
	if _, err := exec.LookPath("man"); err == nil {
		got, err := exec.Command("man", "-l", filepath.Join(dir, "fenced-acquire.1")).CombinedOutput()
		if err != nil || !strings.Contains(string(got), "--ttl") {
			t.Errorf("man -l fenced-acquire.1: %v\n%s", err, got)
		}
	}
	if _, _, code := runFenced(t, "man"); code != 2 {
		t.Errorf("fenced man without --dir: exit %d, want 2", code)
	}
}

// fenced completion prints a script for each shell; bash's parses.
func TestCompletion_EveryShell(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		out, errOut, code := runFenced(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "fenced") || len(out) < 500 {
			t.Fatalf("completion %s: exit %d, %d bytes, %s", sh, code, len(out), errOut)
		}
		if sh == "bash" {
			path := filepath.Join(t.TempDir(), "fenced.bash")
			os.WriteFile(path, []byte(out), 0o644)
			if got, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("bash -n on the completion script: %v\n%s", err, got)
			}
		}
	}
	if _, _, code := runFenced(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
}
