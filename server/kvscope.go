package server

import (
	"fmt"
	"strings"

	fence "github.com/fenced-dev/fenced"
)

// KVScope maps the kv keys under Prefix to the grants of Scope: with it, a
// write of key "cache/17" under Prefix "cache" needs a token of a grant in
// force whose scope covers Scope instead of one covering the key
// (docs/design.md §10). Prefix covers keys as a scope does
// (fence.ScopeCovers): "cache" maps "cache" and "cache/17", not "cache2".
type KVScope struct {
	Prefix string
	Scope  string
}

// ParseKVScope parses PREFIX=SCOPE, the form of the --kv-scope flag.
func ParseKVScope(s string) (KVScope, error) {
	prefix, scope, ok := strings.Cut(s, "=")
	if !ok {
		return KVScope{}, fmt.Errorf("%w: kv scope %q is not PREFIX=SCOPE", fence.ErrInvalidArgument, s)
	}
	m := KVScope{Prefix: prefix, Scope: scope}
	return m, m.validate()
}

func (m KVScope) validate() error {
	if err := fence.ValidateName(m.Prefix); err != nil {
		return fmt.Errorf("kv scope %s=%s: prefix: %w", m.Prefix, m.Scope, err)
	}
	if err := fence.ValidateName(m.Scope); err != nil {
		return fmt.Errorf("kv scope %s=%s: scope: %w", m.Prefix, m.Scope, err)
	}
	return nil
}

// validateKVScopes reports an invalid mapping or a prefix given twice.
func validateKVScopes(maps []KVScope) error {
	seen := make(map[string]bool, len(maps))
	for _, m := range maps {
		if err := m.validate(); err != nil {
			return err
		}
		if seen[m.Prefix] {
			return fmt.Errorf("%w: kv scope prefix %q is given twice", fence.ErrInvalidArgument, m.Prefix)
		}
		seen[m.Prefix] = true
	}
	return nil
}

// kvScopeOf returns the scope the mappings give key: the scope of the
// longest prefix covering it, or "" when none does (the key is its own
// scope). The leader resolves it into the KVWrite it proposes, so every
// replica applies the same rule whatever its own flags.
func kvScopeOf(maps []KVScope, key string) string {
	best, scope := -1, ""
	for _, m := range maps {
		if len(m.Prefix) > best && fence.ScopeCovers(m.Prefix, key) {
			best, scope = len(m.Prefix), m.Scope
		}
	}
	return scope
}
