package fence

import "strings"

// ScopeCovers reports whether a grant of scope covers object: the scope
// itself and every object below it ("orders" covers "orders/17", never
// "orders2").
//
// Pending: branch i12scope defines the project's ScopeCovers; this copy,
// with the same meaning, is removed when that branch is merged.
func ScopeCovers(scope, object string) bool {
	return object == scope || strings.HasPrefix(object, scope) && strings.HasPrefix(object[len(scope):], "/")
}
