package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fenced-dev/fenced/client"
)

// Campaign waits until the session leads, and returns the term token: the
// leader sends it with every write, so that a resource rejects a deposed
// leader's late writes. An observer sees the leader and every change.
func ExampleElection() {
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	changes := c.ObserveElection(ctx, "scheduler")
	fmt.Println("leader:", (<-changes).HasLeader())

	e := client.NewElection(s, "scheduler")
	token, err := e.Campaign(ctx, "host-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	st := <-changes
	fmt.Println("leader:", st.Value, st.Leader.Token == token)

	if err := e.Proclaim(ctx, "host-a:9090"); err != nil {
		log.Fatal(err)
	}
	st = <-changes
	fmt.Println("leader:", st.Value, st.Leader.Token == token)

	// Lead while e.Context() lives; Resign hands over to the next candidate.
	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	<-e.Done()
	fmt.Println("leader:", (<-changes).HasLeader())
	// Output:
	// leader: false
	// leader: host-a:8080 true
	// leader: host-a:9090 true
	// leader: false
}
