package client_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// The examples need a running fenced server, so they are compiled but not
// run.

func ExampleNew() {
	c, err := client.New([]string{"10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700"},
		client.WithRequestTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// A session keeps every lock it holds alive with one renewal. Watch its
// state to pause work while it is in jeopardy and stop when it is lost.
func ExampleSession() {
	c, err := client.New([]string{"127.0.0.1:7700"})
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
	defer s.Close(context.Background())

	for {
		st, changed := s.Watch()
		switch st {
		case client.StateJeopardy:
			log.Printf("session %d: renewals failing, valid until %v", s.ID(), s.ValidUntil())
		case client.StateLost:
			log.Printf("session %d lost: %v", s.ID(), s.Err())
			return
		}
		<-changed
	}
}

// Jeopardy is the early warning: the session is still valid, but renewals
// are not getting through.
func ExampleSession_Jeopardy() {
	c, err := client.New([]string{"127.0.0.1:7700"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-s.Jeopardy():
		log.Printf("in jeopardy: checkpoint now, %v left", time.Until(s.ValidUntil()))
	case <-s.Done():
	}
	<-s.Done()
	log.Printf("lost: %v", s.Err())
}

// Lock waits in the server's queue. The work runs under the grant's
// context and sends the fencing token with every write, so that a resource
// can reject a write from a holder that lost the lock without noticing.
func ExampleMutex_Lock() {
	c, err := client.New([]string{"127.0.0.1:7700"})
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
		"http://reports.internal/daily", strings.NewReader("..."))
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
}

func ExampleMutex_TryLock() {
	c, err := client.New([]string{"127.0.0.1:7700"})
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
		log.Print("another process is compacting")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())
	log.Printf("compacting with token %v", m.Token())
}

// Acquire takes a lock with a TTL of its own and nothing to keep alive:
// for a job that must finish within a known time.
func ExampleClient_Acquire() {
	c, err := client.New([]string{"127.0.0.1:7700"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Acquire(context.Background(), "nightly-backup", 30*time.Minute)
	if errors.Is(err, fence.ErrNotGranted) {
		log.Print("backup already running")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background())

	// Context ends when the lock's validity runs out.
	if err := runBackup(l.Context(), l.Token()); err != nil {
		log.Print(err)
	}
}

func runBackup(ctx context.Context, token fence.Token) error { return ctx.Err() }
