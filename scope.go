package fence

import "strings"

// ScopeCovers reports whether a grant of scope may act on object: object
// is the scope itself or lies under it, with "/" as the separator. Scope
// "orders" covers "orders" and "orders/17", never "orders2" or "ord"; a
// grant of "orders/17" does not cover its parent "orders". An empty scope
// covers nothing. It is the one rule for binding a token to what it was
// issued for: the fenced kv and every guard that checks scopes use it.
func ScopeCovers(scope, object string) bool {
	if scope == "" || !strings.HasPrefix(object, scope) {
		return false
	}
	return len(object) == len(scope) || object[len(scope)] == '/'
}
