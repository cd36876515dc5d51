package main_test

import (
	"strings"
	"testing"
)

// Command-line mistakes exit 2 with cobra's message, whichever command
// they are made at; a command that fails for another reason exits 1.
func TestRoot_ExitCodes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bogus"}, 2, `unknown command "bogus" for "fenced"`},
		{[]string{"serve", "extra"}, 2, `unknown command "extra" for "fenced serve"`},
		{[]string{"cluster", "transfer-leader", "a", "b"}, 2, "accepts at most 1 arg(s), received 2"},
		{[]string{"acquire"}, 2, "acquire takes 1 argument(s), got 0"},
		{[]string{"--nope"}, 2, "unknown flag: --nope"},
		{[]string{"status", "--endpoints", "127.0.0.1:1", "--timeout", "100ms"}, 1, "fenced: "},
	} {
		_, errOut, code := runFenced(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("fenced %v: exit %d %q, want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}
