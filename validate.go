package fence

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits every API call enforces.
const (
	// MaxNameLen is the longest lock name, in bytes.
	MaxNameLen = 512
	// MinTTL is the shortest session or grant TTL.
	MinTTL = 100 * time.Millisecond
	// MaxTTL is the longest session or grant TTL.
	MaxTTL = 24 * time.Hour
	// MaxWait is the longest time an acquire may wait in a queue.
	MaxWait = 24 * time.Hour
	// MaxNodeIDLen is the longest node id, in bytes.
	MaxNodeIDLen = 128
	// MaxNodeAddrLen is the longest node address (HOST:PORT), in bytes.
	MaxNodeAddrLen = 300
)

// ValidateName checks that name is 1 to MaxNameLen bytes of valid UTF-8
// with no control characters (Unicode category Cc), no invisible format
// characters (category Cf: bidirectional controls such as U+202E,
// zero-width characters such as U+200B, the byte order mark) and no line or
// paragraph separators (U+2028, U+2029). Such characters could make a name
// print as another one, or reorder the text around it, in a terminal or a
// log. The error wraps ErrInvalidArgument, says what is allowed and, for a
// refused character, gives its code point and byte offset.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty; want 1 to %d bytes of UTF-8", ErrInvalidArgument, MaxNameLen)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name is %d bytes, longer than %d", ErrInvalidArgument, len(name), MaxNameLen)
	}
	if i, r, what := refusedRune(name); what != "" {
		if what == invalidUTF8 {
			return fmt.Errorf("%w: name is not valid UTF-8 (byte %d)", ErrInvalidArgument, i)
		}
		return fmt.Errorf("%w: name has %s %U at byte %d; names may not contain control characters, invisible format characters or line separators", ErrInvalidArgument, what, r, i)
	}
	return nil
}

const invalidUTF8 = "invalid UTF-8"

// refusedRune returns the byte offset, rune and kind of the first rune of s
// a name may not contain: invalid UTF-8 (utf8.RuneError), a control, an
// invisible format character or a line or paragraph separator. what is ""
// when there is none.
func refusedRune(s string) (offset int, r rune, what string) {
	for i, r := range s {
		if r < utf8.RuneSelf {
			// ASCII, the common case, without the Unicode tables: its
			// only refused runes are the controls (no Cf, Zl or Zp).
			if r < 0x20 || r == 0x7f {
				return i, r, "control character"
			}
			continue
		}
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return i, r, invalidUTF8
			}
		case unicode.IsControl(r):
			return i, r, "control character"
		case unicode.Is(unicode.Cf, r):
			return i, r, "invisible format character (Unicode category Cf)"
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return i, r, "line or paragraph separator"
		}
	}
	return 0, 0, ""
}

// ValidateTTL checks that ttl is within MinTTL..MaxTTL.
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: ttl must be between %s and %s, got %v", ErrInvalidArgument, shortDuration(MinTTL), shortDuration(MaxTTL), ttl)
	}
	return nil
}

// ValidateTTLMillis checks a TTL given in milliseconds, as the API and the
// replicated state carry it, before it is converted to a time.Duration: any
// int64 is checked without overflow. A nil result means
// time.Duration(ms)*time.Millisecond is exact and within MinTTL..MaxTTL.
func ValidateTTLMillis(ms int64) error {
	if ms < MinTTL.Milliseconds() || ms > MaxTTL.Milliseconds() {
		return fmt.Errorf("%w: ttl must be between %s and %s, got %dms", ErrInvalidArgument, shortDuration(MinTTL), shortDuration(MaxTTL), ms)
	}
	return nil
}

// ValidateWait checks that an acquire's wait is within 0..MaxWait.
func ValidateWait(wait time.Duration) error {
	if wait < 0 || wait > MaxWait {
		return fmt.Errorf("%w: wait must be between 0 and %s, got %v", ErrInvalidArgument, shortDuration(MaxWait), wait)
	}
	return nil
}

// ValidateWaitMillis checks an acquire's wait given in milliseconds, as the
// API carries it, before it is converted to a time.Duration (no overflow
// for any int64).
func ValidateWaitMillis(ms int64) error {
	if ms < 0 || ms > MaxWait.Milliseconds() {
		return fmt.Errorf("%w: wait must be between 0 and %s, got %dms", ErrInvalidArgument, shortDuration(MaxWait), ms)
	}
	return nil
}

// ValidateNodeID checks a node id: 1 to MaxNodeIDLen bytes of printable
// characters, without spaces, controls or invisible format characters.
func ValidateNodeID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: node id is empty; want 1 to %d bytes, such as %q", ErrInvalidArgument, MaxNodeIDLen, "n1")
	case len(id) > MaxNodeIDLen:
		return fmt.Errorf("%w: node id is %d bytes; want at most %d", ErrInvalidArgument, len(id), MaxNodeIDLen)
	}
	if i, r, what := refusedRune(id); what != "" {
		return fmt.Errorf("%w: node id %q has %s %U at byte %d; want letters, digits and punctuation only", ErrInvalidArgument, id, what, r, i)
	}
	if i := strings.IndexFunc(id, unicode.IsSpace); i >= 0 {
		return fmt.Errorf("%w: node id %q has spaces or control characters (byte %d); want letters, digits and punctuation only", ErrInvalidArgument, id, i)
	}
	return nil
}

// ValidateNodeAddr checks a node's address (peer or API): HOST:PORT with a
// host (a name or an IP address: letters, digits, '.', '-', '_', ':' inside
// [brackets]) and a port from 1 to 65535, at most MaxNodeAddrLen bytes.
// what names the field in the error ("peer address", "API address").
func ValidateNodeAddr(what, addr string) error {
	if len(addr) > MaxNodeAddrLen {
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalidArgument, what, len(addr), MaxNodeAddrLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not HOST:PORT; want such as %q", ErrInvalidArgument, what, addr, "10.0.0.1:7700")
	}
	if host == "" {
		return fmt.Errorf("%w: %s %q has no host; want such as %q", ErrInvalidArgument, what, addr, "10.0.0.1:7700")
	}
	for i, r := range host {
		if !(r < utf8.RuneSelf && (r == '.' || r == '-' || r == '_' || r == ':' || r == '%' || unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return fmt.Errorf("%w: %s %q has %U at byte %d of its host; want a host name or an IP address", ErrInvalidArgument, what, addr, r, i)
		}
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%w: %s %q has port %q; want a number from 1 to 65535", ErrInvalidArgument, what, addr, port)
	}
	return nil
}

// shortDuration formats d without trailing zero units: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
