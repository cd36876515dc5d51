package guard_test

import (
	"context"
	"fmt"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// BenchmarkDecide_Accept measures the fencing rule alone, accepting.
//
//	go test -run '^$' -bench . -benchmem ./guard/
func BenchmarkDecide_Accept(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := fence.Decide("obj", 100, fence.Token(100+i%2)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide_Stale measures the rule rejecting a stale token (the
// error carries the object and both tokens).
func BenchmarkDecide_Stale(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fence.Decide("obj", 100, 99); err == nil {
			b.Fatal("stale token accepted")
		}
	}
}

// BenchmarkMemory_Check measures guard.Memory's check-and-raise with many
// objects, each write carrying a higher token.
func BenchmarkMemory_Check(b *testing.B) {
	m := &guard.Memory{}
	ctx := context.Background()
	objects := make([]string, 1024)
	for i := range objects {
		objects[i] = fmt.Sprintf("object-%d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := m.Check(ctx, objects[i%len(objects)], fence.Token(i+1)); err != nil {
			b.Fatal(err)
		}
	}
}
