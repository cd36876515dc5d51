package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// entryCommands are commands of every shape the codec meets: strings,
// bytes, nested messages, a command that names its own format version.
func entryCommands() []*statev1.Command {
	hash := fsm.HashSecret([]byte("s"))
	return []*statev1.Command{
		{NowUnixMs: 7, Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 3, Seq: 9, Name: "orders/1", Wait: true, Quota: hotQuota(), SecretHash: hash}}},
		{NowUnixMs: 8, Op: &statev1.Command_Release{Release: &statev1.Release{Session: 3, Seq: 10, Name: "orders/1", SecretHash: hash}}},
		{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 5000, RequestId: "r-1", Quota: hotQuota(), SecretHash: hash}}},
		{FormatVersion: 1, Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 4}}},
		{Op: &statev1.Command_KvWrite{KvWrite: &statev1.KVWrite{Key: "k", Value: []byte("v")}}},
	}
}

// oldEncodeEntry is the entry encoding before EncodeEntry wrote batches
// itself: the Batch command built and marshalled.
func oldEncodeEntry(t *testing.T, cmds []*statev1.Command) []byte {
	t.Helper()
	c := cmds[0]
	if len(cmds) > 1 {
		c = &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: cmds}}}
	}
	b, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if c.GetFormatVersion() == 0 {
		b = protowire.AppendTag(b, 80, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(fsm.FormatVersion))
	}
	return b
}

// The log format does not change: every entry EncodeEntry writes, lone
// or batched, is byte for byte what marshalling the command (or the Batch
// command) wrote, so old and new members read each other's logs.
func TestEncodeEntry_BytesOfTheBatchCommand(t *testing.T) {
	all := entryCommands()
	for n := 1; n <= len(all); n++ {
		cmds := all[:n]
		got, err := fsm.EncodeEntry(n, func(i int) *statev1.Command { return cmds[i] })
		if err != nil {
			t.Fatal(err)
		}
		if want := oldEncodeEntry(t, cmds); !bytes.Equal(got, want) {
			t.Fatalf("%d commands: EncodeEntry wrote\n%x\nmarshalling wrote\n%x", n, got, want)
		}
		if cap(got) != len(got) {
			t.Errorf("%d commands: a buffer of %d bytes for an entry of %d", n, cap(got), len(got))
		}
	}
}

// referenceDecode is the decoder DecodeEntry must agree with: the entry
// unmarshalled whole, its format versions checked, then every field of it
// walked for one (or an enum value) this version does not know, refused as
// a newer format is, then the kinds.
func referenceDecode(entry []byte) ([]*statev1.Command, error) {
	c := new(statev1.Command)
	if err := proto.Unmarshal(entry, c); err != nil {
		return nil, err
	}
	applies := func(v uint32) bool {
		if v == 0 {
			v = 1
		}
		return v >= fsm.MinFormatVersion && v <= fsm.FormatVersion
	}
	if !applies(c.GetFormatVersion()) {
		return nil, fsm.ErrFormatVersion
	}
	for _, in := range c.GetBatch().GetCommands() {
		if !applies(in.GetFormatVersion()) {
			return nil, fsm.ErrFormatVersion
		}
	}
	var unknown func(m protoreflect.Message) bool
	unknown = func(m protoreflect.Message) bool {
		if len(m.GetUnknown()) > 0 {
			return true
		}
		found := false
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Enum() != nil:
				for i := 0; i < v.List().Len() && !found; i++ {
					found = fd.Enum().Values().ByNumber(v.List().Get(i).Enum()) == nil
				}
			case fd.Enum() != nil:
				found = fd.Enum().Values().ByNumber(v.Enum()) == nil
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len() && !found; i++ {
					found = unknown(v.List().Get(i).Message())
				}
			case fd.Message() != nil && !fd.IsMap():
				found = unknown(v.Message())
			}
			return !found
		})
		return found
	}
	if unknown(c.ProtoReflect()) {
		return nil, fsm.ErrFormatVersion
	}
	cmds := []*statev1.Command{c}
	if b, ok := c.GetOp().(*statev1.Command_Batch); ok {
		cmds = b.Batch.GetCommands()
	}
	for _, c := range cmds {
		switch c.GetOp().(type) {
		case nil, *statev1.Command_Batch:
			return nil, errors.New("unknown kind")
		}
	}
	return cmds, nil
}

// checkDecodeAgrees fails unless DecodeEntry and referenceDecode accept
// and refuse the same entries, refuse the same ones for their format
// version, and decode the same commands.
func checkDecodeAgrees(t *testing.T, entry []byte) {
	got, err := fsm.DecodeEntry(entry)
	want, werr := referenceDecode(entry)
	if (err == nil) != (werr == nil) {
		t.Fatalf("entry %x: DecodeEntry: %v; reference: %v", entry, err, werr)
	}
	if errors.Is(err, fsm.ErrFormatVersion) != errors.Is(werr, fsm.ErrFormatVersion) {
		t.Fatalf("entry %x: DecodeEntry: %v; reference: %v", entry, err, werr)
	}
	if err != nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("entry %x: DecodeEntry gave %d commands, reference %d", entry, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("entry %x: command %d: DecodeEntry %v, reference %v", entry, i, got[i], want[i])
		}
	}
}

// decodeSeeds are entries of every shape: the ones EncodeEntry writes and
// the ones it never writes but a log could hold (a Batch twice, other
// fields beside a Batch, unknown fields at each level, versions this
// build does not apply, a batch in a batch, garbage).
func decodeSeeds(t testing.TB) [][]byte {
	all := entryCommands()
	enc := func(cmds ...*statev1.Command) []byte {
		b, err := fsm.EncodeEntry(len(cmds), func(i int) *statev1.Command { return cmds[i] })
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	batch := enc(all...)
	lone := enc(all[0])
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	varint := func(b []byte, num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(b, num, protowire.VarintType), v)
	}
	msg := func(b []byte, num protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), m)
	}
	inner, _ := proto.Marshal(all[1])
	batchOf := func(cmds ...[]byte) []byte {
		var b []byte
		for _, c := range cmds {
			b = msg(b, 1, c)
		}
		return b
	}
	return [][]byte{
		batch,
		lone,
		enc(all[3]),
		enc(all[:2]...),
		append(append([]byte{}, batch...), batch...),                            // a Batch twice: merged
		varint(append([]byte{}, batch...), 15, 99),                              // now_unix_ms beside the Batch
		varint(append([]byte{}, batch...), 99, 1),                               // an unknown outer field
		varint(append([]byte{}, batch...), 80, 2),                               // the outer version 2
		varint(append([]byte{}, batch...), 80, 1<<33+1),                         // a version past uint32
		msg(nil, 12, varint(batchOf(inner), 2, 1)),                              // an unknown field of the Batch
		msg(nil, 12, batchOf(inner, varint(append([]byte{}, inner...), 80, 2))), // an inner version 2
		msg(nil, 12, batchOf(inner, varint(append([]byte{}, inner...), 99, 1))), // an unknown field of a command
		msg(nil, 12, batchOf(inner, msg(nil, 12, nil))),                         // a batch in a batch
		msg(nil, 12, batchOf(inner, nil)),                                       // a command of no kind
		msg(nil, 12, nil),                                                       // an empty batch
		msg(msg(nil, 12, batchOf(inner)), 6, nil),                               // a Batch, then an Acquire: the last wins
		msg(nil, 6, msg(nil, 3, []byte{0xff})),                                  // a name that is not UTF-8
		msg(nil, 12, batchOf(msg(nil, 6, msg(nil, 3, []byte{0xff})))),           // the same in a batch
		{0xff, 0xff, 0xff},
		batch[:len(batch)-4],
		{},
	}
}

// DecodeEntry decodes a batch on a path of its own (decodeBatch); it
// must accept, refuse and decode exactly what unmarshalling the whole
// entry does, for entries of every shape.
func TestDecodeEntry_AgreesWithUnmarshal(t *testing.T) {
	for i, entry := range decodeSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkDecodeAgrees(t, entry) })
	}
}

// FuzzDecodeEntry looks for an entry DecodeEntry and unmarshalling the
// whole entry disagree on.
func FuzzDecodeEntry(f *testing.F) {
	for _, entry := range decodeSeeds(f) {
		f.Add(entry)
	}
	f.Fuzz(checkDecodeAgrees)
}

// CheckDecodable refuses the commands whose entry DecodeEntry refuses
// (the leader applies the commands it vouches for without decoding them):
// a future format version, no kind, an unknown field; and accepts an
// ordinary command. It refuses a Batch command too, which DecodeEntry
// reads as an entry of the batch's commands, not as one command: the
// leader then decodes it, which is only slower.
func TestCheckDecodable_AgreesWithDecodeEntry(t *testing.T) {
	unknown := &statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 1}}}
	unknown.GetNewLeader().ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	for _, tc := range []struct {
		name    string
		cmd     *statev1.Command
		ok      bool
		decodes bool // DecodeEntry accepts the entry
	}{
		{"ordinary", &statev1.Command{NowUnixMs: 5, Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 1}}}, true, true},
		{"future version", &statev1.Command{FormatVersion: fsm.FormatVersion + 1, Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 1}}}, false, false},
		{"no kind", &statev1.Command{NowUnixMs: 5}, false, false},
		{"batch", &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{}}}, false, true},
		{"unknown field", unknown, false, false},
	} {
		checked := fsm.CheckDecodable(tc.cmd)
		b, err := fsm.EncodeEntry(1, func(int) *statev1.Command { return tc.cmd })
		if err != nil {
			t.Fatalf("%s: encode: %v", tc.name, err)
		}
		_, decoded := fsm.DecodeEntry(b)
		if (checked == nil) != tc.ok || (decoded == nil) != tc.decodes {
			t.Errorf("%s: CheckDecodable %v, DecodeEntry %v; want ok %v and %v", tc.name, checked, decoded, tc.ok, tc.decodes)
		}
	}
}
