package server

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	"github.com/fenced-dev/fenced/raftstore"
)

// applyEntry encodes cmds as one entry, as the node proposes them
// together, decodes it again and applies its commands at index, as the node
// does with a committed entry. It returns their results.
func applyEntry(t *testing.T, sm *stateMachine, index uint64, cmds ...*statev1.Command) []fsm.Result {
	t.Helper()
	in := make([]any, len(cmds))
	for i, c := range cmds {
		in[i] = c
	}
	entry, err := sm.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := sm.Decode(entry, nil)
	if err != nil {
		t.Fatal(err)
	}
	applied := make([]raftstore.Command, len(decoded))
	for i, c := range decoded {
		applied[i] = raftstore.Command{Index: index, Term: 1, Cmd: c}
	}
	sm.Apply(applied)
	out := make([]fsm.Result, len(applied))
	for i, c := range applied {
		out[i] = *c.Result.(*fsm.Result)
	}
	return out
}

// A Batch entry has exactly the effect of its commands applied one entry
// each: the same results, in order, and the same state.
func TestStateMachine_BatchEqualsCommandsOneByOne(t *testing.T) {
	cmds := []*statev1.Command{
		{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "i", TokenFloor: 10}}},
		{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 5000}}},
		{Op: &statev1.Command_CreateSession{CreateSession: &statev1.CreateSession{TtlMs: 5000}}},
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 1, Seq: 1, Name: "a"}}},
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 2, Seq: 1, Name: "a", Wait: true}}},
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 1, Seq: 1, Name: "a"}}},  // retry: same grant
		{Op: &statev1.Command_Release{Release: &statev1.Release{Session: 1, Seq: 2, Name: "a"}}},  // grants session 2
		{Op: &statev1.Command_Acquire{Acquire: &statev1.Acquire{Session: 99, Seq: 1, Name: "b"}}}, // unknown session
	}
	one := newStateMachine(nil)
	var want []fsm.Result
	for i, c := range cmds {
		want = append(want, applyEntry(t, one, uint64(i+1), c)...)
	}

	batched := newStateMachine(nil)
	got := applyEntry(t, batched, 1, cmds...)
	if len(got) != len(cmds) {
		t.Fatalf("batch apply returned %d results, want %d", len(got), len(cmds))
	}
	for i := range cmds {
		if !reflect.DeepEqual(got[i], want[i]) && !(got[i].Err != nil && want[i].Err != nil && got[i].Err.Error() == want[i].Err.Error()) {
			t.Fatalf("command %d: batched %+v, one by one %+v", i, got[i], want[i])
		}
	}
	a, _ := one.m.Snapshot()
	b, _ := batched.m.Snapshot()
	if !bytes.Equal(a, b) {
		t.Fatal("state after the batch differs from the state after the commands one by one")
	}

}

// An entry is decoded whole or refused: a batch inside a batch, a command
// of no known kind and a field this version does not know are decode
// errors (the node stops on them), never commands skipped or refused one
// by one.
func TestStateMachine_DecodeRefusesWhatItDoesNotKnow(t *testing.T) {
	sm := newStateMachine(nil)
	nested, err := sm.Encode([]any{&statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{}}}, &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{}}}})
	if err != nil {
		t.Fatal(err)
	}
	noKind, err := fsm.Encode(&statev1.Command{NowUnixMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	release, err := fsm.Encode(&statev1.Command{Op: &statev1.Command_Release{Release: &statev1.Release{Session: 1, Seq: 1, Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Field 99 of Release, varint 1: unknown to this version.
	unknownField := append([]byte{}, release...)
	unknownField[1] += 3
	unknownField = append(unknownField, 0x98, 0x06, 0x01)
	for name, entry := range map[string][]byte{
		"batch in a batch": nested,
		"no kind":          noKind,
		"unknown field":    unknownField,
		"garbage":          {0xff, 0xff, 0xff},
	} {
		if cmds, err := sm.Decode(entry, nil); err == nil {
			t.Errorf("%s: decoded to %v, want an error", name, cmds)
		}
	}
	if cmds, err := sm.Decode(release, nil); err != nil || len(cmds) != 1 {
		t.Fatalf("a release: %v, %v", cmds, err)
	}
}
