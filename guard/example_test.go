package guard_test

import (
	"context"
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// A handler's write goes through Do, whatever transport admitted the
// request: here WithFence stands in for the httpfence middleware or the
// grpcfence interceptors, which call it with the request's object and
// token.
func ExampleDo() {
	var marks guard.Memory
	doc := ""
	write := func(ctx context.Context, text string) error {
		return guard.Do(ctx, func(ctx context.Context) error {
			doc = text // the write, atomic with the check of the token
			return nil
		})
	}

	fmt.Println(write(guard.WithFence(context.Background(), "docs/readme", 34, &marks), "written by the current holder"))
	err := write(guard.WithFence(context.Background(), "docs/readme", 33, &marks), "written by a holder that paused past its lease")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("rejected: presented %d, required %d\n", stale.Presented, stale.Required)
	}
	fmt.Println(doc)
	// Output:
	// <nil>
	// rejected: presented 33, required 34
	// written by the current holder
}

// A fence.GuardFunc is a fence.Guard too. Here it logs and hands the
// step to a Memory; a database guard (postgres.Guard, sqlfence.Guard) runs
// apply inside the transaction that checks and raises the watermark.
func ExampleDo_guardFunc() {
	var marks guard.Memory
	g := fence.GuardFunc(func(ctx context.Context, object string, t fence.Token, apply func(context.Context) error) error {
		fmt.Printf("checking token %d for %s\n", t, object)
		return marks.Do(ctx, object, t, apply)
	})
	ctx := guard.WithFence(context.Background(), "orders/7", 12, g)
	err := guard.Do(ctx, func(ctx context.Context) error {
		fmt.Println("writing")
		return nil
	})
	fmt.Println(err, marks.Watermark("orders/7"))
	// Output:
	// checking token 12 for orders/7
	// writing
	// <nil> 12
}
