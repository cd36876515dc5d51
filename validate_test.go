package fence_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// TTLs in milliseconds are checked before any conversion: values whose
// conversion to a time.Duration overflows are refused, with the allowed
// range and the value as sent.
func TestValidateTTLMillis(t *testing.T) {
	for _, tt := range []struct {
		ms   int64
		ok   bool
		want string
	}{
		{100, true, ""},
		{86_400_000, true, ""},
		{99, false, "got 99ms"},
		{0, false, "got 0ms"},
		{-1, false, "got -1ms"},
		{86_400_001, false, "got 86400001ms"},
		// 2^58+100 ms wraps to 100ms when multiplied by time.Millisecond.
		{1<<58 + 100, false, "got 288230376151711844ms"},
		// The maximum int64 wraps to -1ms.
		{math.MaxInt64, false, "got 9223372036854775807ms"},
		{math.MinInt64, false, "got -9223372036854775808ms"},
	} {
		err := fence.ValidateTTLMillis(tt.ms)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateTTLMillis(%d) = %v, want ok=%v", tt.ms, err, tt.ok)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("ValidateTTLMillis(%d) error does not wrap ErrInvalidArgument: %v", tt.ms, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "ttl must be between 100ms and 24h") || !strings.Contains(msg, tt.want) {
			t.Errorf("ValidateTTLMillis(%d) = %q, want the range and %q", tt.ms, msg, tt.want)
		}
	}
}

func TestValidateWaitMillis(t *testing.T) {
	for _, tt := range []struct {
		ms int64
		ok bool
	}{
		{0, true}, {1, true}, {86_400_000, true},
		{-1, false}, {86_400_001, false}, {1<<58 + 100, false}, {math.MaxInt64, false}, {math.MinInt64, false},
	} {
		err := fence.ValidateWaitMillis(tt.ms)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateWaitMillis(%d) = %v, want ok=%v", tt.ms, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "wait must be between 0 and 24h") {
			t.Errorf("ValidateWaitMillis(%d) = %q, want the allowed range", tt.ms, err)
		}
	}
}

// The duration and the millisecond validators accept the same range.
func TestValidateTTL_AgreesWithMillis(t *testing.T) {
	for _, ms := range []int64{-1, 0, 99, 100, 101, 86_399_999, 86_400_000, 86_400_001} {
		d := time.Duration(ms) * time.Millisecond
		if a, b := fence.ValidateTTL(d) == nil, fence.ValidateTTLMillis(ms) == nil; a != b {
			t.Errorf("%dms: ValidateTTL ok=%v, ValidateTTLMillis ok=%v", ms, a, b)
		}
		if a, b := fence.ValidateWait(d) == nil, fence.ValidateWaitMillis(ms) == nil; a != b {
			t.Errorf("%dms: ValidateWait ok=%v, ValidateWaitMillis ok=%v", ms, a, b)
		}
	}
}

// Names with characters that print invisibly or reorder text are refused,
// naming the code point and its byte offset.
func TestValidateName_InvisibleCharacters(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string
	}{
		{"orders\u202e", "U+202E at byte 6"},        // right-to-left override
		{"a\u2066b\u2069", "U+2066 at byte 1"},      // left-to-right isolate
		{"ab\u200bc", "U+200B at byte 2"},           // zero-width space
		{"\u200dx", "U+200D at byte 0"},             // zero-width joiner
		{"\ufeffx", "U+FEFF at byte 0"},             // byte order mark
		{"soft\u00adhyphen", "U+00AD at byte 4"},    // soft hyphen
		{"x\u061c", "U+061C at byte 1"},             // Arabic letter mark
		{"tag\U000E0041", "U+E0041 at byte 3"},      // tag character
		{"line\u2028break", "U+2028 at byte 4"},     // line separator
		{"para\u2029break", "U+2029 at byte 4"},     // paragraph separator
		{"nul\x00", "U+0000 at byte 3"},             // control
		{"c1\u0085", "U+0085 at byte 2"},            // C1 control (next line)
		{"bad\xffutf8", "not valid UTF-8 (byte 3)"}, // invalid UTF-8
	} {
		err := fence.ValidateName(tt.name)
		if err == nil {
			t.Errorf("ValidateName(%q) = nil, want an error", tt.name)
			continue
		}
		if !errors.Is(err, fence.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidArgument naming %q", tt.name, err, tt.want)
		}
	}
	// Visible non-ASCII text, including the replacement character itself,
	// stays allowed.
	for _, ok := range []string{"ünïcødé ✓", "日本語/ロック", "emoji-🔒", "\ufffd", "right-to-left עברית"} {
		if err := fence.ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", ok, err)
		}
	}
}

func TestValidateNodeID(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"n1", true},
		{"node-1.eu_west", true},
		{strings.Repeat("n", fence.MaxNodeIDLen), true},
		{strings.Repeat("n", fence.MaxNodeIDLen+1), false},
		{"", false},
		{"n 1", false},
		{"n\t1", false},
		{"n\u202e1", false},
		{"n\u00a01", false}, // no-break space
	} {
		err := fence.ValidateNodeID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateNodeID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		}
		if err != nil && !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("ValidateNodeID(%q) error does not wrap ErrInvalidArgument: %v", tt.id, err)
		}
	}
}

func TestValidateNodeAddr(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:7700", true},
		{"fenced-1.example.com:7700", true},
		{"[::1]:7700", true},
		{"[fe80::1%eth0]:7700", true},
		{"localhost:65535", true},
		{"", false},
		{"127.0.0.1", false},
		{":7700", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:-1", false},
		{"evil host:7700", false},
		{"a/b:7700", false},
		{"h\u202e:7700", false},
		{"ä.example:7700", false},
		{strings.Repeat("a", fence.MaxNodeAddrLen) + ":1", false},
	} {
		err := fence.ValidateNodeAddr("API address", tt.addr)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateNodeAddr(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, fence.ErrInvalidArgument) || !strings.Contains(err.Error(), "API address")) {
			t.Errorf("ValidateNodeAddr(%q) = %v, want ErrInvalidArgument naming the field", tt.addr, err)
		}
	}
}
