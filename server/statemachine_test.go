package server

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func logOf(t *testing.T, index uint64, c *statev1.Command) *raft.Log {
	t.Helper()
	data, err := fsm.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: data}
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
		want = append(want, one.Apply(logOf(t, uint64(i+1), c)).(fsm.Result))
	}

	batched := newStateMachine(nil)
	resp := batched.Apply(logOf(t, 1, &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: cmds}}}))
	got, ok := resp.(batchResults)
	if !ok || len(got) != len(cmds) {
		t.Fatalf("batch apply returned %T %v, want %d results", resp, resp, len(cmds))
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

	nested := batched.Apply(logOf(t, 2, &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: []*statev1.Command{
		{Op: &statev1.Command_Batch{Batch: &statev1.Batch{}}},
	}}}})).(batchResults)
	if !errors.Is(nested[0].Err, fence.ErrInvalidArgument) {
		t.Fatalf("a batch inside a batch: %v, want invalid argument", nested[0].Err)
	}
}
