package raftstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fenced-dev/fenced/raftstore"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "fenced-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	cfg := raftstore.DefaultConfig()
	cfg.DataDir = dir
	cfg.PeerListen = "127.0.0.1:0" // any free port
	cfg.Bootstrap = true
	cfg.Logger = slog.New(slog.DiscardHandler)

	node, err := raftstore.Open(cfg, &counter{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Shutdown()

	// A bootstrapped single node elects itself.
	for l := node.Leadership(); !l.Leader; l = node.Leadership() {
		<-l.Changed
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		resp, err := node.Propose(ctx, "inc")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("count:", resp)
	}
	// Output:
	// count: 1
	// count: 2
	// count: 3
}
