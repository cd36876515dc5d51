package main

import (
	"strconv"

	fence "github.com/fenced-dev/fenced"
)

// shown returns text received from a server (a lock name, a node id, an
// issuer) as it may be printed on a terminal: unchanged when it holds only
// what a name may hold (fence.ValidateName: no control characters,
// invisible format characters such as bidirectional overrides or
// zero-width spaces, or line separators), else quoted with Go escapes, so
// it can never hide itself, pass for another name or reorder the text
// around it. The server refuses such names, but a state written before it
// did, or a server that is not this one, may still send them.
func shown(s string) string {
	if s == "" || fence.ValidateName(s) == nil {
		return s
	}
	return strconv.Quote(s)
}

// shownAll applies shown to each of names.
func shownAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = shown(n)
	}
	return out
}
