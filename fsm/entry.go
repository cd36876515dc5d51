package fsm

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// A Raft log entry holds the commands proposed at the same moment (group
// commit): a command proposed alone is its entry (Encode), several are one
// Batch command, whose commands are applied one by one, each exactly as if
// it were an entry of its own.

// The field numbers of a batch entry, Command.batch and Batch.commands.
var (
	batchField    = (&statev1.Command{}).ProtoReflect().Descriptor().Fields().ByName("batch").Number()
	commandsField = (&statev1.Batch{}).ProtoReflect().Descriptor().Fields().ByName("commands").Number()
)

// EncodeEntry encodes the n commands proposed together, cmd(0) to
// cmd(n-1), as one log entry: one command as itself (Encode), several as
// a Batch command marked with the format version. A batch is written as
// proto.Marshal would write the Batch command holding them, byte for
// byte, but straight into one buffer of exactly the entry's size, without
// building the Batch.
func EncodeEntry(n int, cmd func(i int) *statev1.Command) ([]byte, error) {
	if n == 1 {
		return Encode(cmd(0))
	}
	inner := 0
	for i := range n {
		inner += protowire.SizeTag(commandsField) + protowire.SizeBytes(proto.Size(cmd(i)))
	}
	outer := &statev1.Command{} // for its format version: none, so this build's
	size := protowire.SizeTag(batchField) + protowire.SizeBytes(inner) + formatSize(outer)
	b := make([]byte, 0, size)
	b = protowire.AppendTag(b, batchField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	for i := range n {
		c := cmd(i)
		b = protowire.AppendTag(b, commandsField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(cached.Size(c)))
		var err error
		if b, err = cached.MarshalAppend(b, c); err != nil {
			return nil, fmt.Errorf("encode command %d of a batch: %w", i, err)
		}
	}
	b = appendFormat(b, outer)
	if len(b) != size {
		return nil, fmt.Errorf("encode batch: %d bytes written, %d sized: a command changed while it was encoded", len(b), size)
	}
	return b, nil
}

// DecodeEntry decodes an entry EncodeEntry wrote and returns its
// commands, in order. An entry is refused whole unless every command in
// it is one this version knows: a command of no known kind, a field or
// enum value this version does not know (written by a newer one, or
// garbled bytes that still parse: an error matching ErrFormatVersion,
// format.go), or a batch inside a batch. A member stops on such an entry
// rather than skip it or apply it without what it does not know.
//
// The commands of a batch are decoded into one array (decodeBatch), so a
// command kept beyond its apply would keep its whole batch in memory. The
// state keeps no command: a name, value or payload it keeps from one is an
// allocation of its own.
func DecodeEntry(entry []byte) ([]*statev1.Command, error) {
	cmds, err := decodeBatch(entry)
	batch := true
	switch {
	case errors.Is(err, errNotBatch):
		cmds, err = decodeLone(entry)
		batch = false
	case errors.Is(err, errNotCanonical):
		cmds, batch, err = decodeAny(entry)
	}
	if err != nil {
		return nil, err
	}
	for i, c := range cmds {
		if err := checkKnown(c.ProtoReflect(), "the command", i, batch); err != nil {
			return nil, fmt.Errorf("decode command: %w", err)
		}
		if err := knownCommand(c); err != nil {
			if batch {
				return nil, fmt.Errorf("command %d of a batch: %w", i, err)
			}
			return nil, err
		}
	}
	return cmds, nil
}

// loneEntry is a command and the slice DecodeEntry returns for it, in one
// allocation.
type loneEntry struct {
	cmd  statev1.Command
	cmds [1]*statev1.Command
}

// decodeLone decodes an entry of one command.
func decodeLone(entry []byte) ([]*statev1.Command, error) {
	e := new(loneEntry)
	if err := proto.Unmarshal(entry, &e.cmd); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	if err := checkFormat("the command", e.cmd.GetFormatVersion()); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	e.cmds[0] = &e.cmd
	return e.cmds[:], nil
}

// decodeAny decodes an entry of any shape with Decode (which refuses a
// field or value this build does not know anywhere in it, the outer
// command and the Batch included), and reports whether it is a batch.
func decodeAny(entry []byte) (cmds []*statev1.Command, batch bool, err error) {
	cmd, err := Decode(entry)
	if err != nil {
		return nil, false, err
	}
	b, ok := cmd.GetOp().(*statev1.Command_Batch)
	if !ok {
		return []*statev1.Command{cmd}, false, nil
	}
	return b.Batch.GetCommands(), true, nil
}

// errNotBatch and errNotCanonical are decodeBatch's answers for an entry
// it leaves to decodeLone and decodeAny.
var (
	errNotBatch     = errors.New("not a batch")
	errNotCanonical = errors.New("not a batch as EncodeEntry writes it")
)

// decodeBatch decodes a batch entry laid out as EncodeEntry writes it:
// the outer command holds the Batch once and its format version, and the
// Batch holds its commands and nothing else. Its commands are decoded
// into one array and one slice of them, instead of one allocation per
// command and the slice grown command by command. An entry without a
// Batch is errNotBatch. Any other entry, including bytes that do not
// parse, is errNotCanonical, left to Decode, which decodes it as
// proto.Unmarshal does (merging a Batch that appears twice, for
// instance) or refuses it.
func decodeBatch(entry []byte) ([]*statev1.Command, error) {
	var batch []byte
	version, batches, other := uint64(0), 0, false
	for b := entry; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errNotCanonical
		}
		b = b[n:]
		switch {
		case num == batchField && typ == protowire.BytesType:
			batch, n = protowire.ConsumeBytes(b)
			batches++
		case num == formatField && typ == protowire.VarintType:
			version, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			other = true
		}
		if n < 0 {
			return nil, errNotCanonical
		}
		b = b[n:]
	}
	switch {
	case batches == 0:
		return nil, errNotBatch
	case batches > 1 || other || version > math.MaxUint32:
		return nil, errNotCanonical
	}
	count := 0
	for b := batch; len(b) > 0; count++ {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != commandsField || typ != protowire.BytesType {
			return nil, errNotCanonical
		}
		_, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, errNotCanonical
		}
		b = b[n+m:]
	}
	arena := make([]statev1.Command, count)
	cmds := make([]*statev1.Command, count)
	for i, b := 0, batch; len(b) > 0; i++ {
		_, _, n := protowire.ConsumeTag(b)
		c, m := protowire.ConsumeBytes(b[n:])
		b = b[n+m:]
		if err := proto.Unmarshal(c, &arena[i]); err != nil {
			return nil, fmt.Errorf("decode command: %w", err)
		}
		cmds[i] = &arena[i]
	}
	if err := checkFormat("the command", uint32(version)); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	for i, c := range cmds {
		if err := checkBatchFormat(i, c); err != nil {
			return nil, fmt.Errorf("decode command: %w", err)
		}
	}
	return cmds, nil
}

// CheckDecodable returns the error DecodeEntry would refuse an entry
// holding cmd with, checking cmd as it is, without encoding and decoding
// it: a format version this build does not apply, a command of no kind it
// knows or a batch (a batch is not proposed as one command of a batch),
// or a field it does not know.
func CheckDecodable(cmd *statev1.Command) error {
	if err := checkFormat("the command", cmd.GetFormatVersion()); err != nil {
		return fmt.Errorf("decode command: %w", err)
	}
	if err := knownCommand(cmd); err != nil {
		return err
	}
	if err := checkKnown(cmd.ProtoReflect(), "the command", 0, false); err != nil {
		return fmt.Errorf("decode command: %w", err)
	}
	return nil
}

// knownCommand checks that cmd is of a kind Apply knows and not a batch.
func knownCommand(cmd *statev1.Command) error {
	switch cmd.GetOp().(type) {
	case nil:
		return errors.New("decode command: a command of no kind this version knows (written by a newer version?)")
	case *statev1.Command_Batch:
		return errors.New("decode command: a batch inside a batch")
	}
	return nil
}
