package outbox

import (
	fence "github.com/fenced-dev/fenced"
)

// IdempotencyKey returns the stable idempotency key "resource:token" of a
// side effect on resource made under token t (docs/design.md §1). Every attempt
// of the same side effect, including one repeated after a crash, carries
// the same key, so a receiver that remembers the keys it has processed
// (Stripe's Idempotency-Key, a unique column, a dedup table) applies it
// once.
//
// The key identifies one side effect per resource and token: two different
// side effects made under one grant need two resources (for example
// "order-7/charge" and "order-7/email"), or the receiver takes the second
// for a repeat of the first. The key is unambiguous even when resource
// contains ':', because the token is always the part after the last one.
func IdempotencyKey(resource string, t fence.Token) string {
	return resource + ":" + t.String()
}
