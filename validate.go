package fence

import (
	"fmt"
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
)

// ValidateName checks that name is 1 to MaxNameLen bytes of valid UTF-8 with
// no control characters. The error wraps ErrInvalidArgument and says what
// is allowed.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: name is empty; want 1 to %d bytes of UTF-8", ErrInvalidArgument, MaxNameLen)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name is %d bytes, longer than %d", ErrInvalidArgument, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name is not valid UTF-8", ErrInvalidArgument)
	}
	for i, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: name has control character %U at byte %d; control characters are not allowed", ErrInvalidArgument, r, i)
		}
	}
	return nil
}

// ValidateTTL checks that ttl is within MinTTL..MaxTTL.
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v is out of range; ttl must be between %s and %s", ErrInvalidArgument, ttl, shortDuration(MinTTL), shortDuration(MaxTTL))
	}
	return nil
}

// ValidateWait checks that an acquire's wait is within 0..MaxWait.
func ValidateWait(wait time.Duration) error {
	if wait < 0 || wait > MaxWait {
		return fmt.Errorf("%w: wait %v is out of range; wait must be between 0 and %s", ErrInvalidArgument, wait, shortDuration(MaxWait))
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
