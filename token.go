package fence

import (
	"fmt"
	"strconv"
)

// Token is a fencing token: a number ordered after every token its issuer
// issued before. It is never 0 and never above MaxToken, so it fits a
// PostgreSQL BIGINT and a Java long.
type Token uint64

// MaxToken is the largest valid token, 2^63-1. A counter that would pass it
// fails with ErrTokenOverflow instead of wrapping.
const MaxToken Token = 1<<63 - 1

// Valid reports whether t is within 1..MaxToken.
func (t Token) Valid() bool { return t >= 1 && t <= MaxToken }

// String returns t in decimal, the form used in HTTP headers and JSON.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ParseToken parses a decimal token as sent in X-Fencing-Token or JSON.
// It rejects empty strings, signs, non-digits, 0 and values above MaxToken.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: token is empty; want a decimal number from 1 to %d", ErrInvalidToken, MaxToken)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a decimal number; want digits only, 1 to %d", ErrInvalidToken, s, MaxToken)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || Token(v) > MaxToken {
		return 0, fmt.Errorf("%w: %q is above the maximum %d", ErrInvalidToken, s, MaxToken)
	}
	if v == 0 {
		return 0, fmt.Errorf("%w: token 0 is never issued; want 1 to %d", ErrInvalidToken, MaxToken)
	}
	return Token(v), nil
}
