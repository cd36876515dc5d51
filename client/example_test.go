package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// The examples run against a real single-node server started in this test
// binary (see examples_server_test.go): endpoints() returns its address
// where a program would list its cluster's, for example
// []string{"10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700"}.

func ExampleNew() {
	c, err := client.New(endpoints(), client.WithRequestTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	st, err := c.ClusterStatus(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("members:", len(st.GetMembers()))
	// Output:
	// members: 1
}

// A session keeps every lock it holds alive with one renewal. Watch its
// state to pause work while it is in jeopardy and stop when it is lost.
func ExampleSession() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, client.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}

	st, changed := s.Watch()
	go func() {
		// The work; here it ends at once and closes the session.
		s.Close(context.Background())
	}()
	for {
		switch st {
		case client.StateValid:
			fmt.Println("valid: working")
		case client.StateJeopardy:
			fmt.Printf("jeopardy: pausing, valid for %v more\n", time.Until(s.ValidUntil()))
		case client.StateLost:
			fmt.Println("lost; closed:", errors.Is(s.Err(), client.ErrSessionClosed))
			return
		}
		<-changed
		st, changed = s.Watch()
	}
	// Output:
	// valid: working
	// lost; closed: true
}

// Jeopardy is the early warning: the session is still valid, but renewals
// are not getting through. A job checks it between steps and checkpoints
// when it comes.
func ExampleSession_Jeopardy() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())

	for step := range 3 {
		select {
		case <-s.Jeopardy():
			fmt.Printf("checkpoint before step %d: %v left\n", step, time.Until(s.ValidUntil()))
			return
		default:
		}
		fmt.Println("step", step)
	}
	// Output:
	// step 0
	// step 1
	// step 2
}

// Lock waits in the server's queue. The work runs under the grant's
// context and sends the fencing token with every write, so that a resource
// can reject a write from a holder that lost the lock without noticing.
func ExampleMutex_Lock() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())

	m := client.NewMutex(s, "reports/daily")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())

	// The request is cancelled if the grant is lost.
	req, err := http.NewRequestWithContext(m.Context(), http.MethodPut,
		reportsURL()+"/daily", strings.NewReader("..."))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("X-Fencing-Token", m.Token().String())
	req.Header.Set("X-Resource-Id", "reports/daily")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// 204 No Content
}

func ExampleMutex_TryLock() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())

	m := client.NewMutex(s, "compaction")
	switch err := m.TryLock(context.Background()); {
	case errors.Is(err, fence.ErrNotGranted):
		fmt.Println("another process is compacting")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())
	fmt.Println("compacting with a token:", m.Token() > 0)
	// Output:
	// compacting with a token: true
}

// Acquire takes a lock with a TTL of its own and nothing to keep alive:
// for a job that must finish within a known time.
func ExampleClient_Acquire() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Acquire(context.Background(), "nightly-backup", 30*time.Minute)
	if errors.Is(err, fence.ErrNotGranted) {
		fmt.Println("backup already running")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background())

	// Context ends when the lock's validity runs out.
	if err := runBackup(l.Context(), l.Token()); err != nil {
		log.Print(err)
		return
	}
	fmt.Println("backup done")
	// Output:
	// backup done
}

func runBackup(ctx context.Context, token fence.Token) error { return ctx.Err() }

// Readers share a read/write lock; a writer waits for them, and holds back
// every reader that asks after it. Every grant has its own token: the
// writer's is above the readers' it followed.
func ExampleRWMutex() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reader, err := c.NewSession(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close(ctx)
	writer, err := c.NewSession(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer writer.Close(ctx)

	r := client.NewRWMutex(reader, "example/config")
	rg, err := r.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reader holds a", rg.Grant().Kind, "grant")

	w := client.NewRWMutex(writer, "example/config")
	if _, err := w.TryLock(ctx); errors.Is(err, fence.ErrNotGranted) {
		fmt.Println("the writer waits for the reader")
	}
	if err := r.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	wg, err := w.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer holds a", wg.Grant().Kind, "grant, token above the reader's:", wg.Token() > rg.Token())
	if err := w.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// reader holds a read grant
	// the writer waits for the reader
	// writer holds a write grant, token above the reader's: true
}

// A worker claims orders and sends each claim's token with its write to
// the resource (object: the claim's scope), so that a write made after
// the claim ended is rejected there. The SDK keeps the claim alive while
// the work runs; Context is cancelled if it is lost.
func ExampleQueue_Claim() {
	c, err := client.New(endpoints())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	q := client.NewQueue(c, "example-orders")
	if _, _, err := q.Push(ctx, []byte(`{"id":"order-1"}`), client.WithDedupeKey("order-1")); err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())

	claim, err := q.Claim(ctx, s, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// The work: write to the resource with claim.Token, object claim.Scope,
	// under claim.Context().
	fmt.Printf("%s: %s (kind %s)\n", claim.Scope, claim.Payload, claim.Grant.Kind)
	if err := claim.Ack(ctx); err != nil {
		log.Fatal(err) // errors.Is(err, fence.ErrStaleToken): the claim had ended
	}
	// Output:
	// example-orders/1: {"id":"order-1"} (kind claim)
}
