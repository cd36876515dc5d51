package server

import (
	"os"
	"path/filepath"
	"testing"
)

// The recorded reservation only rises, survives a reopen, and a file that
// does not read back as written refuses the start.
func TestTokenReservation(t *testing.T) {
	dir := t.TempDir()
	r, err := openTokenReservation(dir)
	if err != nil || r.load() != 0 {
		t.Fatalf("fresh dir: %v, end %d; want 0", err, r.load())
	}
	if err := r.raise(2000); err != nil {
		t.Fatal(err)
	}
	if err := r.raise(1000); err != nil || r.load() != 2000 {
		t.Fatalf("raise to a lower end: %v, end %d; want 2000", err, r.load())
	}
	again, err := openTokenReservation(dir)
	if err != nil || again.load() != 2000 {
		t.Fatalf("reopen: %v, end %d; want 2000", err, again.load())
	}

	path := filepath.Join(dir, reservationFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"a digit changed": string(b[:len(reservationHeader)+1]) + "1" + string(b[len(reservationHeader)+2:]),
		"empty":           "",
		"no newline":      string(b[:len(b)-1]),
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openTokenReservation(dir); err == nil {
			t.Errorf("%s: opened, want an error", name)
		}
	}
}
