package fence_test

import (
	"errors"
	"strconv"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	fence "github.com/fenced-dev/fenced"
)

// FuzzParseToken checks ParseToken against a reference: it accepts exactly
// the non-empty strings of ASCII digits whose value is 1..MaxToken, and a
// token it returns prints back to a string it parses to the same token.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "42", "9223372036854775807", "9223372036854775808", "18446744073709551616",
		"0", "00", "007", "", "-1", "+1", " 1", "1 ", "1e3", "0x10", "١٢", "1\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fence.ParseToken(s)
		digits := s != ""
		for i := 0; i < len(s); i++ {
			digits = digits && s[i] >= '0' && s[i] <= '9'
		}
		v, perr := strconv.ParseUint(s, 10, 64)
		want := digits && perr == nil && v >= 1 && v <= uint64(fence.MaxToken)
		if (err == nil) != want {
			t.Fatalf("ParseToken(%q) = %d, %v; want ok=%v", s, tok, err, want)
		}
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("ParseToken(%q) error %v does not match ErrInvalidToken", s, err)
			}
			return
		}
		if !tok.Valid() || uint64(tok) != v {
			t.Fatalf("ParseToken(%q) = %d, want %d", s, tok, v)
		}
		if again, err := fence.ParseToken(tok.String()); err != nil || again != tok {
			t.Fatalf("ParseToken(%q) = %d, %v; want %d", tok.String(), again, err, tok)
		}
	})
}

// FuzzValidateMillis checks that the millisecond validators accept exactly
// the values whose conversion to a time.Duration is exact and in range, for
// any int64.
func FuzzValidateMillis(f *testing.F) {
	for _, ms := range []int64{0, 99, 100, 86_400_000, 86_400_001, 1<<58 + 100, -1, 1<<63 - 1, -1 << 63, 9_223_372_036_855} {
		f.Add(ms)
	}
	f.Fuzz(func(t *testing.T, ms int64) {
		inRange := func(lo, hi time.Duration) bool {
			// Compare in milliseconds: no conversion of an unchecked value.
			return ms >= lo.Milliseconds() && ms <= hi.Milliseconds()
		}
		if ok := fence.ValidateTTLMillis(ms) == nil; ok != inRange(fence.MinTTL, fence.MaxTTL) {
			t.Fatalf("ValidateTTLMillis(%d) ok=%v", ms, ok)
		} else if ok {
			d := time.Duration(ms) * time.Millisecond
			if d < fence.MinTTL || d > fence.MaxTTL || d.Milliseconds() != ms {
				t.Fatalf("ValidateTTLMillis(%d) accepted a value that converts to %v", ms, d)
			}
		}
		if ok := fence.ValidateWaitMillis(ms) == nil; ok != inRange(0, fence.MaxWait) {
			t.Fatalf("ValidateWaitMillis(%d) ok=%v", ms, ok)
		}
	})
}

// FuzzValidateName checks that an accepted name is 1..MaxNameLen bytes of
// valid UTF-8 without controls, format characters or line and paragraph
// separators, and that every other string is refused with
// ErrInvalidArgument.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a", "orders/1", "a\u202eb", "\u200b", "\ufeff", "x\u2028", "\xff", "ünï ✓", "\ufffd", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s != "" && len(s) <= fence.MaxNameLen && utf8.ValidString(s)
		for _, r := range s {
			want = want && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) && !unicode.In(r, unicode.Zl, unicode.Zp)
		}
		err := fence.ValidateName(s)
		if (err == nil) != want {
			t.Fatalf("ValidateName(%q) = %v, want ok=%v", s, err, want)
		}
		if err != nil && !errors.Is(err, fence.ErrInvalidArgument) {
			t.Fatalf("ValidateName(%q) error %v does not match ErrInvalidArgument", s, err)
		}
	})
}
