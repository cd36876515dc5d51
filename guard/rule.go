package guard

import fence "github.com/fenced-dev/fenced"

// Decide applies the watermark rule to a token presented for object whose
// current watermark is mark (0 when the object has none). It returns the new
// watermark, or a *fence.StaleTokenError when the token is rejected. Every
// guard calls it inside the atomic step that also raises the watermark.
func Decide(object string, mark, presented fence.Token) (fence.Token, error) {
	if !presented.Valid() {
		return mark, &fence.StaleTokenError{Object: object, Presented: presented, Required: max(mark, 1)}
	}
	if presented < mark {
		return mark, &fence.StaleTokenError{Object: object, Presented: presented, Required: mark}
	}
	return presented, nil
}
