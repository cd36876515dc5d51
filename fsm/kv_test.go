package fsm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/guard/guardtest"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func kvWrite(m *fsm.Machine, w *statev1.KVWrite) fsm.Result {
	return m.Apply(&statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: w}})
}

// kvTarget drives the state machine's kv through the conformance suite.
type kvTarget struct {
	mu sync.Mutex
	m  *fsm.Machine
}

func (k *kvTarget) Write(ctx context.Context, key string, t fence.Token, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return kvWrite(k.m, &statev1.KVWrite{Key: key, Token: uint64(t), Value: []byte(value)}).Err
}

func (k *kvTarget) Read(ctx context.Context, key string) (string, fence.Token, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.m.KV(key)
	return string(e.Value), e.Token, nil
}

func TestKV_Conformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T) guardtest.Target {
		m := fsm.New(nil)
		m.Apply(initCommand(uint64(fence.MaxToken))) // every token in range counts as issued
		return &kvTarget{m: m}
	})
}

func TestKV_VersionsAndDeletes(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	for i := 0; i < 10; i++ {
		acquire(m, s, uint64(i+1), "issue", false)
		release(m, s, uint64(100+i), "issue")
	}
	put := func(tok uint64, val string, ifVersion *uint64) fsm.Result {
		w := &statev1.KVWrite{Key: "k", Token: tok, Value: []byte(val)}
		if ifVersion != nil {
			w.HasIfVersion, w.IfVersion = true, *ifVersion
		}
		return kvWrite(m, w)
	}
	v := func(n uint64) *uint64 { return &n }

	if res := put(3, "a", v(0)); res.Err != nil || res.KV.Version != 1 {
		t.Fatalf("create with if_version 0: %+v", res)
	}
	var vm *fence.VersionMismatchError
	if res := put(3, "b", v(0)); !errors.As(res.Err, &vm) || vm.Current != 1 {
		t.Fatalf("create again with if_version 0: %v, want version mismatch (current 1)", res.Err)
	}
	if res := put(4, "b", v(1)); res.Err != nil || res.KV.Version != 2 || res.KV.Token != 4 {
		t.Fatalf("conditional put: %+v", res)
	}
	// A stale token is reported as stale even when the version matches.
	var se *fence.StaleTokenError
	if res := put(3, "c", v(2)); !errors.As(res.Err, &se) || se.Required != 4 {
		t.Fatalf("stale conditional put: %v", res.Err)
	}
	if res := kvWrite(m, &statev1.KVWrite{Key: "k", Token: 5, Delete: true}); !res.KV.Deleted || res.KV.Version != 3 {
		t.Fatalf("delete: %+v", res)
	}
	// The watermark survives the delete: a stale writer cannot recreate the key.
	if res := put(4, "zombie", nil); !errors.As(res.Err, &se) || se.Required != 5 {
		t.Fatalf("stale put after delete: %v, want stale with required 5", res.Err)
	}
	if e := m.KV("k"); e.Exists || e.Token != 5 || e.Version != 3 {
		t.Fatalf("KV after delete=%+v", e)
	}
	if res := put(6, "new", v(0)); res.Err != nil || res.KV.Version != 4 {
		t.Fatalf("recreate after delete: %+v (versions never repeat)", res)
	}
}

func TestKV_BadInputChangesNothing(t *testing.T) {
	m := newMachine(t)
	s := createSession(t, m)
	acquire(m, s, 1, "x", false) // token 1 issued
	kvWrite(m, &statev1.KVWrite{Key: "k", Token: 1, Value: []byte("v")})
	before := mustSnapshot(t, m)
	for _, tt := range []struct {
		name string
		w    *statev1.KVWrite
		want error
		msg  string
	}{
		{"token never issued", &statev1.KVWrite{Key: "k", Token: 2}, fence.ErrInvalidToken, "never issued"},
		{"token 0", &statev1.KVWrite{Key: "k", Token: 0}, fence.ErrInvalidToken, "out of range"},
		{"token above max", &statev1.KVWrite{Key: "k", Token: 1 << 63}, fence.ErrInvalidToken, "out of range"},
		{"empty key", &statev1.KVWrite{Key: "", Token: 1}, fence.ErrInvalidArgument, "empty"},
		{"value too large", &statev1.KVWrite{Key: "k", Token: 1, Value: make([]byte, fsm.MaxValueBytes+1)}, fence.ErrInvalidArgument, "1 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := kvWrite(m, tt.w)
			if !errors.Is(res.Err, tt.want) || !strings.Contains(res.Err.Error(), tt.msg) {
				t.Fatalf("Err=%v, want %v mentioning %q", res.Err, tt.want, tt.msg)
			}
			if string(mustSnapshot(t, m)) != string(before) {
				t.Fatal("a refused kv write changed the state")
			}
		})
	}
}

// A retried kv write (same request id) is applied once and answered with
// the original result, even after other writes.
func TestKV_RetriedWriteAppliedOnce(t *testing.T) {
	m := fsm.New(nil)
	m.Apply(initCommand(100))
	first := kvWrite(m, &statev1.KVWrite{Key: "k", Token: 5, Value: []byte("a"), RequestId: "req-1"})
	kvWrite(m, &statev1.KVWrite{Key: "k", Token: 6, Value: []byte("b")})
	retry := kvWrite(m, &statev1.KVWrite{Key: "k", Token: 5, Value: []byte("a"), RequestId: "req-1"})
	if retry.Err != nil || retry.KV != first.KV {
		t.Fatalf("retry=%+v, want the original %+v", retry, first)
	}
	if e := m.KV("k"); e.Version != 2 || string(e.Value) != "b" {
		t.Fatalf("KV after the retry=%+v, want version 2 value b: the retry must not apply again", e)
	}
}
