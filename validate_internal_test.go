package fence

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestRefusedRune_ASCIIFastPathAgreesWithUnicode checks every ASCII rune,
// alone and inside a name, against the Unicode classification the
// non-ASCII runes go through: the fast path must refuse exactly the runes
// the tables refuse.
func TestRefusedRune_ASCIIFastPathAgreesWithUnicode(t *testing.T) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		want := unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.In(r, unicode.Zl, unicode.Zp)
		for _, s := range []string{string(r), "a/" + string(r) + "/b"} {
			_, got, what := refusedRune(s)
			if refused := what != ""; refused != want {
				t.Errorf("refusedRune(%q) refused=%v (%q), want %v", s, refused, what, want)
			} else if refused && got != r {
				t.Errorf("refusedRune(%q) names rune %U, want %U", s, got, r)
			}
		}
	}
}
