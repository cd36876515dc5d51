package fsm

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// formatField is Command.format_version's field number.
const formatField = 80

// cached marshals with the sizes a proto.Size call just before cached in
// the messages, so that a command is sized once, not once to size its
// buffer and again inside Marshal.
var cached = proto.MarshalOptions{UseCachedSize: true}

// Encode serialises a command for the Raft log, marked with the format
// version this build writes (format.go) unless c names one itself. The
// entry is written into one buffer of exactly its size.
func Encode(c *statev1.Command) ([]byte, error) {
	n := EncodedSize(c)
	b, err := cached.MarshalAppend(make([]byte, 0, n), c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	b = appendFormat(b, c)
	if len(b) != n {
		return nil, fmt.Errorf("encode command: %d bytes written, %d sized: the command changed while it was encoded", len(b), n)
	}
	return b, nil
}

// appendFormat appends the format version this build writes, unless c
// names one itself. Appending the field is the same as setting it (the
// last value of a scalar field wins) without touching the caller's
// command.
func appendFormat(b []byte, c *statev1.Command) []byte {
	if c.GetFormatVersion() != 0 {
		return b
	}
	b = protowire.AppendTag(b, formatField, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(FormatVersion))
}

// formatSize is the size appendFormat adds for c.
func formatSize(c *statev1.Command) int {
	if c.GetFormatVersion() != 0 {
		return 0
	}
	return protowire.SizeTag(formatField) + protowire.SizeVarint(uint64(FormatVersion))
}

// EncodedSize returns the size of c's entry as Encode writes it.
func EncodedSize(c *statev1.Command) int {
	return proto.Size(c) + formatSize(c)
}

// Decode parses a command written by Encode. A command, or a command of
// its batch, in a format version this build does not apply is refused with
// an error matching ErrFormatVersion, before anything else is looked at;
// so is one holding a field or enum value this build does not know,
// anywhere in it (checkKnown).
func Decode(b []byte) (*statev1.Command, error) {
	c := new(statev1.Command)
	if err := proto.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	if err := checkFormat("the command", c.GetFormatVersion()); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	for i, in := range c.GetBatch().GetCommands() {
		if err := checkBatchFormat(i, in); err != nil {
			return nil, fmt.Errorf("decode command: %w", err)
		}
	}
	if err := checkKnown(c.ProtoReflect(), "the command", 0, false); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	return c, nil
}

// checkBatchFormat is checkFormat for command i of a batch; the name of
// the command is only formatted for the error.
func checkBatchFormat(i int, c *statev1.Command) error {
	if applies(c.GetFormatVersion()) {
		return nil
	}
	return checkFormat(fmt.Sprintf("command %d of the batch", i), c.GetFormatVersion())
}
