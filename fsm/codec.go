package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Encode serialises a command for the Raft log.
func Encode(c *statev1.Command) ([]byte, error) {
	b, err := proto.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode command: %w", err)
	}
	return b, nil
}

// Decode parses a command written by Encode.
func Decode(b []byte) (*statev1.Command, error) {
	c := new(statev1.Command)
	if err := proto.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	return c, nil
}
