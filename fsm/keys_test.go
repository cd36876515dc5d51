package fsm_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func seed(b byte) []byte { return bytes.Repeat([]byte{b}, ed25519.SeedSize) }

func rotate(m *fsm.Machine, s []byte, keep uint32, bootstrap bool) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_RotateKeys{RotateKeys: &statev1.RotateKeys{Seed: s, CreatedAtUnixMs: int64(len(m.SigningKeys())) + 100, Keep: keep, Bootstrap: bootstrap}}})
}

func keyIDs(m *fsm.Machine) []string {
	var ids []string
	for _, k := range m.SigningKeys() {
		ids = append(ids, k.ID)
	}
	return ids
}

func idOf(s []byte) string {
	return fence.KeyIDOf(ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey))
}

// TestKeys_Rotate: the bootstrap key is made once, a rotation signs with
// the new key and keeps the newest keep keys, oldest first.
func TestKeys_Rotate(t *testing.T) {
	m := newMachine(t)
	if _, _, ok := m.SigningKey(); ok {
		t.Fatal("a new state has a signing key")
	}
	if res := rotate(m, seed(1), 3, true); res.Err != nil || res.Ignored {
		t.Fatalf("bootstrap rotation: %+v", res)
	}
	if res := rotate(m, seed(2), 3, true); !res.Ignored {
		t.Fatalf("second bootstrap=%+v, want ignored", res)
	}
	for _, b := range []byte{2, 3, 4} {
		if res := rotate(m, seed(b), 3, false); res.Err != nil {
			t.Fatalf("rotate: %v", res.Err)
		}
	}
	want := []string{idOf(seed(2)), idOf(seed(3)), idOf(seed(4))}
	if got := keyIDs(m); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("keys %v, want %v (the oldest dropped)", got, want)
	}
	id, key, ok := m.SigningKey()
	if !ok || id != want[2] || !bytes.Equal(key.Seed(), seed(4)) {
		t.Fatalf("SigningKey=%s, want the newest %s", id, want[2])
	}
	if pub := m.SigningKeys()[2].Key; !bytes.Equal(pub, key.Public().(ed25519.PublicKey)) {
		t.Fatal("the published key is not the signing key's public key")
	}
	// keep 1 drops every earlier key at once (a compromised key).
	if res := rotate(m, seed(5), 1, false); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := keyIDs(m); len(got) != 1 || got[0] != idOf(seed(5)) {
		t.Fatalf("after keep 1: keys %v", got)
	}
}

// TestKeys_BadRotationChangesNothing: a short seed, keep out of range or
// a key already present is refused and leaves the state as it was.
func TestKeys_BadRotationChangesNothing(t *testing.T) {
	m := newMachine(t)
	rotate(m, seed(1), 3, false)
	before, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string]fsm.Result{
		"short seed": rotate(m, seed(2)[:31], 3, false),
		"no seed":    rotate(m, nil, 3, false),
		"keep 0":     rotate(m, seed(2), 0, false),
		"keep 17":    rotate(m, seed(2), fsm.MaxKeysKept+1, false),
		"same key":   rotate(m, seed(1), 3, false),
	} {
		if !errors.Is(res.Err, fence.ErrInvalidArgument) {
			t.Errorf("%s: %+v, want fence.ErrInvalidArgument", name, res)
		}
	}
	if after, _ := m.Snapshot(); !bytes.Equal(before, after) {
		t.Fatal("a refused rotation changed the state")
	}
}

// TestKeys_Snapshot: the keys survive a snapshot; a snapshot whose key id
// does not match its seed, or that repeats a key, is refused.
func TestKeys_Snapshot(t *testing.T) {
	m := newMachine(t)
	rotate(m, seed(1), 3, false)
	rotate(m, seed(2), 3, false)
	data, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := fsm.New(nil)
	if err := r.Restore(data); err != nil {
		t.Fatal(err)
	}
	if got, want := keyIDs(r), keyIDs(m); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("restored keys %v, want %v", got, want)
	}
	if id, _, _ := r.SigningKey(); id != idOf(seed(2)) {
		t.Fatalf("restored signing key %s", id)
	}
	var st statev1.State
	if err := proto.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*statev1.State){
		"wrong id":   func(st *statev1.State) { st.SigningKeys[0].Id = "0000000000000000" },
		"repeated":   func(st *statev1.State) { st.SigningKeys[1] = st.SigningKeys[0] },
		"short seed": func(st *statev1.State) { st.SigningKeys[0].Seed = st.SigningKeys[0].Seed[:10] },
		"too many": func(st *statev1.State) {
			for i := 0; i < fsm.MaxKeysKept; i++ {
				st.SigningKeys = append(st.SigningKeys, &statev1.SigningKey{Id: idOf(seed(byte(10 + i))), Seed: seed(byte(10 + i))})
			}
		},
	} {
		bad := proto.Clone(&st).(*statev1.State)
		edit(bad)
		b, _ := proto.Marshal(bad)
		if err := fsm.New(nil).Restore(b); err == nil {
			t.Errorf("%s: Restore accepted it", name)
		}
	}
}
