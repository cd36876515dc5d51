package fence_test

import (
	"errors"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
)

func TestParseToken(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want fence.Token
		err  string
	}{
		{"1", 1, ""},
		{"42", 42, ""},
		{"9223372036854775807", fence.MaxToken, ""},
		{"9223372036854775808", 0, "above the maximum"},
		{"18446744073709551616", 0, "above the maximum"},
		{"0", 0, "never issued"},
		{"", 0, "empty"},
		{"-1", 0, "not a decimal"},
		{"+1", 0, "not a decimal"},
		{" 1", 0, "not a decimal"},
		{"0x10", 0, "not a decimal"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := fence.ParseToken(tt.in)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseToken(%q)=%d, %v, want %d", tt.in, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, fence.ErrInvalidToken) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("ParseToken(%q) error=%v, want ErrInvalidToken mentioning %q", tt.in, err, tt.err)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"orders/2026-11-29", true},
		{"ünïcødé ✓", true},
		{strings.Repeat("x", 512), true},
		{strings.Repeat("x", 513), false},
		{"", false},
		{"tab\there", false},
		{"del\x7f", false},
		{"\xc3\x28", false},
	} {
		err := fence.ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q)=%v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("ValidateName(%q) error does not wrap ErrInvalidArgument: %v", tt.name, err)
		}
	}
}

func TestStaleTokenError(t *testing.T) {
	err := error(&fence.StaleTokenError{Object: "orders", Presented: 7, Required: 9})
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatal("StaleTokenError does not match ErrStaleToken")
	}
	if msg := err.Error(); !strings.Contains(msg, "7") || !strings.Contains(msg, "9") || !strings.Contains(msg, "orders") {
		t.Fatalf("message %q does not name the object, presented and required token", msg)
	}
}
