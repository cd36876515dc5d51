//go:build fencedfaults

package fsm_test

import (
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// The unfenced-kv fault of a test build accepts a stale write on the
// machine it is set on, and only there; the command is the same.
func TestMachine_UnfencedKVFault(t *testing.T) {
	fenced, unfenced := newMachine(t), newMachine(t)
	unfenced.SetUnfencedKV(true)
	for _, m := range []*fsm.Machine{fenced, unfenced} {
		m.Apply(initCommand(10))
		kvWrite(m, &statev1.KVWrite{Key: "k", Token: 5, Value: []byte("new")})
	}
	stale := &statev1.KVWrite{Key: "k", Token: 3, Value: []byte("old")}
	var se *fence.StaleTokenError
	if res := kvWrite(fenced, stale); !errors.As(res.Err, &se) {
		t.Fatalf("stale write without the fault: %v, want a stale token error", res.Err)
	}
	if res := kvWrite(unfenced, stale); res.Err != nil {
		t.Fatalf("stale write with the unfenced-kv fault: %v, want it accepted", res.Err)
	}
	if got := string(unfenced.KV("k").Value); got != "old" {
		t.Fatalf("value=%q after the accepted stale write, want old", got)
	}
}
