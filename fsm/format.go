package fsm

import (
	"errors"
	"fmt"
)

// The replicated format (docs/operations.md, "Upgrades"). Every log entry
// and every snapshot carries the format version it was written in
// (Command.format_version on the entry's outer command, State.format_version);
// an entry or snapshot without one was written before versions existed and
// is version 1. A member applies the versions MinFormatVersion to
// FormatVersion and stops at any other: applying what it does not
// understand, or skipping it, would make its state, and the tokens it
// issues, differ from the other members'.
//
// The upgrade rule: a release that introduces version N+1 still applies
// versions up to N, and writes N+1 only for commands that need it. A
// cluster is upgraded one member at a time, each back and caught up before
// the next; a feature that writes version N+1 may be used only once every
// member runs a release that applies N+1. A member that meets N+1 before
// it is upgraded stops with ErrFormatVersion and the version it met, and
// starts again once it is upgraded (the entry is still in its log).
const (
	// FormatVersion is the newest format version this build applies, and
	// the version it writes.
	FormatVersion uint32 = 1
	// MinFormatVersion is the oldest format version this build applies.
	MinFormatVersion uint32 = 1
)

// ErrFormatVersion is the error of an entry or snapshot written in a
// format version this build does not apply.
var ErrFormatVersion = errors.New("fsm: replicated format version not understood")

// formatOf returns the format version a message carries: 0 is version 1.
func formatOf(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

// applies reports whether this build applies format version v (0 is 1).
func applies(v uint32) bool {
	v = formatOf(v)
	return v >= MinFormatVersion && v <= FormatVersion
}

// checkFormat returns an error matching ErrFormatVersion unless version v
// (0 is 1) of what names is one this build applies.
func checkFormat(what string, v uint32) error {
	if applies(v) {
		return nil
	}
	v = formatOf(v)
	return fmt.Errorf("%w: %s is in format version %d; this build applies versions %d to %d: run a fenced release that applies version %d on this member (docs/operations.md, \"Upgrades\"); the node stops rather than skip it", ErrFormatVersion, what, v, MinFormatVersion, FormatVersion, v)
}
