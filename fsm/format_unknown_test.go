package fsm_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// withUnknown sets field num (a varint 1), unknown to this build, on m,
// as a newer release writing a field it added would.
func withUnknown(m protoreflect.ProtoMessage, num protowire.Number) {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	m.ProtoReflect().SetUnknown(protowire.AppendVarint(b, 1))
}

// wantNewer fails unless err refuses what a newer release wrote, naming
// what and telling the operator to upgrade.
func wantNewer(t *testing.T, name string, err error, what string) {
	t.Helper()
	if !errors.Is(err, fsm.ErrFormatVersion) || !strings.Contains(err.Error(), "this build does not know ("+what) || !strings.Contains(err.Error(), "upgrade this node") {
		t.Errorf("%s: %v, want ErrFormatVersion naming %s and the upgrade", name, err, what)
	}
	var nf interface{ NewerFormat() bool }
	if !errors.As(err, &nf) || !nf.NewerFormat() {
		t.Errorf("%s: the error does not say a newer release wrote it (NewerFormat)", name)
	}
}

// An entry holding a field, command kind or enum value this build does not
// know (a newer release wrote it, no version bump needed) is refused as a
// newer format version is, wherever it sits: in the command, deep in it,
// in a command of a batch. The negative control: protobuf alone decodes
// every one of them without an error, and the machine applies what is
// left — a grant this member would issue with the newer field ignored.
func TestCodec_RefusesWhatThisBuildDoesNotKnow(t *testing.T) {
	acquire := func() *statev1.Command {
		return &statev1.Command{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Name: "orders", TtlMs: 5000, RequestId: "r1"}}}
	}
	entry := func(cmds ...*statev1.Command) []byte {
		t.Helper()
		b, err := fsm.EncodeEntry(len(cmds), func(i int) *statev1.Command { return cmds[i] })
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inAcquire := acquire()
	withUnknown(inAcquire.GetAcquire(), 999)
	inQuota := acquire()
	inQuota.GetAcquire().Quota = &statev1.Quota{Owner: "a", MaxSessions: 10, MaxHeld: 10}
	withUnknown(inQuota.GetAcquire().Quota, 77)
	// A higher field number appended to the bytes of the command.
	appended := protowire.AppendVarint(protowire.AppendTag(entry(acquire()), 998, protowire.VarintType), 1)
	// A command of a kind added after this build: a new case of Command.op.
	newKind := protowire.AppendBytes(protowire.AppendTag(nil, 997, protowire.BytesType), []byte{0x08, 0x01})
	mode := &statev1.Command{Op: &statev1.Command_RwAcquire{RwAcquire: &statev1.RWAcquire{Name: "orders", TtlMs: 5000, RequestId: "r2", Mode: statev1.RWMode(7)}}}
	for _, c := range []struct {
		name, what string
		entry      []byte
	}{
		{"a field of the acquire", "field 999 of fenced.state.v1.Acquire", entry(inAcquire)},
		{"a field of a message in the acquire", "field 77 of fenced.state.v1.Quota", entry(inQuota)},
		{"a field appended to the command", "field 998 of fenced.state.v1.Command", appended},
		{"a command of a new kind", "field 997 of fenced.state.v1.Command", newKind},
		{"an enum value", "value 7 of fenced.state.v1.RWAcquire.mode", entry(mode)},
		{"in a batch", "field 999 of fenced.state.v1.Acquire", entry(acquire(), inAcquire)},
	} {
		cmds, err := fsm.DecodeEntry(c.entry)
		if err == nil {
			t.Errorf("%s: decoded to %v, want it refused", c.name, cmds)
			continue
		}
		wantNewer(t, c.name, err, c.what)
		if _, err := fsm.Decode(c.entry); !errors.Is(err, fsm.ErrFormatVersion) {
			t.Errorf("%s: Decode = %v, want ErrFormatVersion", c.name, err)
		}
		// The negative control: what an older member did before.
		cmd := new(statev1.Command)
		if err := proto.Unmarshal(c.entry, cmd); err != nil {
			t.Fatalf("%s: protobuf refuses it itself (%v): the attack shows nothing", c.name, err)
		}
		if c.name == "a command of a new kind" {
			continue // no kind left to apply
		}
		if b := cmd.GetBatch(); b != nil {
			cmd = b.GetCommands()[1]
		}
		m := fsm.New(nil)
		m.Apply(initCommand(0))
		res := m.Apply(cmd)
		if c.name == "an enum value" {
			// Applied as bad input: an answer, where a release that knows
			// mode 7 grants it, and no stop.
			if res.Err == nil || res.Granted {
				t.Errorf("%s: without the check: %+v, want it refused as bad input", c.name, res)
			}
			continue
		}
		if !res.Granted {
			t.Errorf("%s: without the check the machine did not apply it (%+v): the control shows nothing", c.name, res)
		}
	}
	if _, err := fsm.DecodeEntry(entry(acquire(), acquire())); err != nil {
		t.Fatalf("the same batch without the unknown field: %v", err)
	}
}

// A snapshot holding a field this build does not know, at the top or
// deep in a session, is refused as a newer format version is and leaves
// the machine empty; without the field it restores.
func TestSnapshot_RefusesWhatThisBuildDoesNotKnow(t *testing.T) {
	snap := mustSnapshot(t, goldenState(t))
	for _, c := range []struct {
		name, what string
		set        func(st *statev1.State)
	}{
		{"in the state", "field 999 of fenced.state.v1.State", func(st *statev1.State) { withUnknown(st, 999) }},
		{"in a session", "field 998 of fenced.state.v1.Session", func(st *statev1.State) { withUnknown(st.GetSessions()[1], 998) }},
		{"in a reply", "field 997 of fenced.state.v1.Reply", func(st *statev1.State) { withUnknown(st.GetSessions()[0].GetReplies()[0], 997) }},
	} {
		var st statev1.State
		if err := proto.Unmarshal(snap, &st); err != nil {
			t.Fatal(err)
		}
		c.set(&st)
		b, err := proto.Marshal(&st)
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(b, new(statev1.State)); err != nil {
			t.Fatalf("%s: protobuf refuses it itself (%v): the attack shows nothing", c.name, err)
		}
		fresh := fsm.New(nil)
		wantNewer(t, c.name, fresh.Restore(b), c.what)
		if fresh.Issuer() != "" || fresh.LastToken() != 0 {
			t.Errorf("%s: a refused snapshot left state behind", c.name)
		}
	}
	if err := fsm.New(nil).Restore(snap); err != nil {
		t.Fatalf("the snapshot without the field: %v", err)
	}
}
