package fsm

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// formatField is Command.format_version's field number.
const formatField = 80

// Encode serialises a command for the Raft log, marked with the format
// version this build writes (format.go) unless c names one itself.
func Encode(c *statev1.Command) ([]byte, error) {
	b, err := proto.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	if c.GetFormatVersion() == 0 {
		// Appending the field is the same as setting it (the last value
		// of a scalar field wins) without touching the caller's command.
		b = protowire.AppendTag(b, formatField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(FormatVersion))
	}
	return b, nil
}

// EncodedSize returns the size of c's entry as Encode writes it.
func EncodedSize(c *statev1.Command) int {
	n := proto.Size(c)
	if c.GetFormatVersion() == 0 {
		n += protowire.SizeTag(formatField) + protowire.SizeVarint(uint64(FormatVersion))
	}
	return n
}

// Decode parses a command written by Encode. A command, or a command of
// its batch, in a format version this build does not apply is refused with
// an error matching ErrFormatVersion, before anything else is looked at.
func Decode(b []byte) (*statev1.Command, error) {
	c := new(statev1.Command)
	if err := proto.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	if err := checkFormat("the command", c.GetFormatVersion()); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	for i, in := range c.GetBatch().GetCommands() {
		if err := checkFormat(fmt.Sprintf("command %d of the batch", i), in.GetFormatVersion()); err != nil {
			return nil, fmt.Errorf("decode command: %w", err)
		}
	}
	return c, nil
}
