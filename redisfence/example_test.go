package redisfence_test

import (
	"context"
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisfence"
)

// A writer whose lock was taken over (a newer token has written) is
// rejected, and learns which token it would need.
func Example() {
	ctx := context.Background()
	rdb := exampleClient() // redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	g := redisfence.New(rdb)

	// The current holder (token 34) writes; readers use plain GET.
	if err := g.Set(ctx, "example:report", 34, "from 34", 0); err != nil {
		fmt.Println(err)
	}
	// A former holder wakes up from a pause and writes with token 33.
	err := g.Set(ctx, "example:report", 33, "from 33", 0)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("rejected: presented %d, required %d\n", stale.Presented, stale.Required)
	}
	fmt.Println(rdb.Get(ctx, "example:report").Val())
	// Output:
	// rejected: presented 33, required 34
	// from 34
}

// A fenced script: the token check runs first, then the caller's Lua, in
// one EVAL. KEYS[1] is the protected key, extra keys follow.
func ExampleScript() {
	ctx := context.Background()
	rdb := exampleClient() // redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	g := redisfence.New(rdb)

	// Move an item from a queue to the done list, fenced on the queue.
	move := redisfence.NewScript(`
local item = redis.call('LPOP', KEYS[1])
if item then redis.call('RPUSH', KEYS[2], item .. '@' .. FENCING_TOKEN) end
return item`)

	rdb.RPush(ctx, "{jobs}:queue", "a", "b")
	item, err := move.Run(ctx, g, "{jobs}:queue", 7, []string{"{jobs}:done"}).Text()
	fmt.Println(item, err)
	_, err = move.Run(ctx, g, "{jobs}:queue", 6, []string{"{jobs}:done"}).Text()
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	fmt.Println(rdb.LRange(ctx, "{jobs}:done", 0, -1).Val())
	// Output:
	// a <nil>
	// true
	// [a@7]
}

// Del keeps the watermark: a stale writer cannot recreate the key.
func ExampleGuard_Del() {
	ctx := context.Background()
	rdb := exampleClient() // redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	g := redisfence.New(rdb)

	g.Set(ctx, "example:session", 5, "data", 0)
	n, _ := g.Del(ctx, "example:session", 6)
	fmt.Println("deleted", n)
	err := g.Set(ctx, "example:session", 5, "data again", 0)
	fmt.Println(err)
	// Output:
	// deleted 1
	// fence: stale token 5 for "example:session": the object has accepted token 6; a write needs a token of at least 6
}

func ExampleWatermarkKey() {
	fmt.Println(redisfence.WatermarkKey("orders"))
	fmt.Println(redisfence.WatermarkKey("{user:1}:cart"))
	// Output:
	// {orders}:fencing-token:orders
	// {user:1}:fencing-token:{user:1}:cart
}

// Do runs the commands a function queues, after the token check, in one
// MULTI/EXEC with the raise of the watermark; a stale token queues nothing.
func ExampleGuard_Do() {
	ctx := context.Background()
	rdb := exampleClient() // redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	g := redisfence.New(rdb)

	publish := func(token fence.Token, body string) error {
		return g.Do(ctx, "{report}:latest", token, func(ctx context.Context) error {
			pipe, _ := redisfence.PipelinerFromContext(ctx)
			pipe.Set(ctx, "{report}:latest", body, 0)
			pipe.RPush(ctx, "{report}:history", body) // same hash slot
			return nil
		})
	}
	fmt.Println(publish(34, "from 34"))
	fmt.Println(errors.Is(publish(33, "from 33"), fence.ErrStaleToken))
	fmt.Println(rdb.Get(ctx, "{report}:latest").Val(), rdb.LRange(ctx, "{report}:history", 0, -1).Val())
	// Output:
	// <nil>
	// true
	// from 34 [from 34]
}
