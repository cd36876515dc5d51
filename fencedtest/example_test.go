package fencedtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/fencedtest"
	"github.com/fenced-dev/fenced/guard"
)

// A holder whose session expires while it is paused writes with its old
// token and the resource's guard rejects the write: the test of an
// application's stale-writer path, against a real server.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "fencedtest-example-")
	defer os.RemoveAll(dir)
	srv, err := fencedtest.New(dir)
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	var resource guard.Memory // the resource's guard: any fence.Guard
	write := func(who string, token fence.Token) {
		err := resource.Check(ctx, "orders", token)
		switch {
		case errors.Is(err, fence.ErrStaleToken):
			fmt.Printf("%s writes with token %d: rejected, stale\n", who, token)
		case err != nil:
			panic(err)
		default:
			fmt.Printf("%s writes with token %d: accepted\n", who, token)
		}
	}

	holder := func() (*client.Client, *client.Session) {
		c, err := client.New(srv.Endpoints())
		if err != nil {
			panic(err)
		}
		s, err := c.NewSession(ctx)
		if err != nil {
			panic(err)
		}
		return c, s
	}
	ca, a := holder()
	defer ca.Close()
	cb, b := holder()
	defer cb.Close()

	ma := client.NewMutex(a, "orders")
	if err := ma.Lock(ctx); err != nil {
		panic(err)
	}
	tokenA := ma.Token()
	write("A", tokenA)

	// B queues for the lock; A's lease runs out while A is paused.
	mb := client.NewMutex(b, "orders")
	locked := make(chan error, 1)
	go func() { locked <- mb.Lock(ctx) }()
	if err := srv.ExpireSession(ctx, a.ID()); err != nil {
		panic(err)
	}
	if err := <-locked; err != nil {
		panic(err)
	}
	write("B", mb.Token())

	// A wakes up, still believing it holds the lock.
	write("A", tokenA)
	// Output:
	// A writes with token 1: accepted
	// B writes with token 2: accepted
	// A writes with token 1: rejected, stale
}
