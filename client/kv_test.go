package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/bounded"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// The server's kv is stricter than a guard of the conformance suite
// (guardtest): it accepts a token only while a live grant whose scope
// covers the key holds it (docs/design.md §10), so the suite's tokens,
// which no grant holds, are refused. The fenced kv of the state machine
// without the scope rule passes the suite (fsm TestKV_Conformance); the
// rule itself is tested in fsm/kvscope_test.go and
// server/kvscope_test.go.

func TestKV_StaleWriterAndVersions(t *testing.T) {
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	old, err := c.Acquire(ctx, "orders", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KVPut(ctx, "orders", []byte("from A"), old.Token(), client.IfVersion(0), client.WithIssuer(old.Grant().Issuer)); err != nil {
		t.Fatalf("first write: %v", err)
	}
	<-old.Context().Done() // A's lease runs out; B takes over
	var b *client.TTLLock
	for b == nil {
		if b, err = c.Acquire(ctx, "orders", 10*time.Second); errors.Is(err, fence.ErrNotGranted) {
			time.Sleep(20 * time.Millisecond)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.KVPut(ctx, "orders", []byte("from B"), b.Token())
	if err != nil || v != 2 {
		t.Fatalf("B's write: version %d, %v", v, err)
	}
	_, err = c.KVPut(ctx, "orders", []byte("late A"), old.Token())
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || se.Required != b.Token() || se.Presented != old.Token() {
		t.Fatalf("A's late write: %v, want stale with required %d", err, b.Token())
	}
	var vm *fence.VersionMismatchError
	if _, err := c.KVPut(ctx, "orders", []byte("x"), b.Token(), client.IfVersion(1)); !errors.As(err, &vm) || !errors.Is(err, fence.ErrVersionMismatch) ||
		*vm != (fence.VersionMismatchError{Object: "orders", Expected: 1, Current: 2}) {
		t.Fatalf("put with an old version: %v, want version mismatch (expected 1, current 2)", err)
	}
	if _, err := c.KVPut(ctx, "orders", []byte("x"), b.Token(), client.WithIssuer("someone-else")); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Fatalf("put with another issuer: %v, want ErrIssuerMismatch", err)
	}
	if _, err := c.KVPut(ctx, "orders", []byte("x"), b.Token()+1000); !errors.Is(err, fence.ErrInvalidToken) {
		t.Fatalf("put with a token never issued: %v, want ErrInvalidToken", err)
	}
	e, err := c.KVGet(ctx, "orders")
	if err != nil || string(e.Value) != "from B" || e.Version != 2 || e.Token != b.Token() {
		t.Fatalf("KVGet=%+v, %v", e, err)
	}
	if deleted, err := c.KVDelete(ctx, "orders", old.Token()); deleted || !errors.As(err, &se) {
		t.Fatalf("stale delete: %v %v", deleted, err)
	}
	if deleted, err := c.KVDelete(ctx, "orders", b.Token()); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, err := c.KVGet(ctx, "orders"); !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// Values up to the 1 MiB limit go through the SDK (whose kv puts share the
// pipeline stream with lock calls); one byte more is refused clearly.
func TestKV_LargestValueThroughTheSDK(t *testing.T) {
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, "big", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 1<<20)
	for i := range value {
		value[i] = byte(i)
	}
	// Lock traffic in flight on the same stream at the same time.
	done := make(chan error, 1)
	go func() {
		s, err := c.NewSession(ctx)
		if err == nil {
			m := client.NewMutex(s, "beside-the-big-put")
			if err = m.Lock(ctx); err == nil {
				err = m.Unlock(ctx)
			}
		}
		done <- err
	}()
	if _, err := c.KVPut(ctx, "big", value, l.Token()); err != nil {
		t.Fatalf("put of 1 MiB: %v", err)
	}
	if err := bounded.Recv(t, "lock beside the put", bound, done); err != nil {
		t.Fatalf("lock beside the put: %v", err)
	}
	e, err := c.KVGet(ctx, "big")
	if err != nil || len(e.Value) != len(value) || e.Value[12345] != value[12345] {
		t.Fatalf("get: %d bytes, %v", len(e.Value), err)
	}
	_, err = c.KVPut(ctx, "big", make([]byte, 1<<20+1), l.Token())
	if !errors.Is(err, fence.ErrInvalidArgument) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("put of 1 MiB + 1: %v, want an invalid-argument error naming the limit", err)
	}
}
