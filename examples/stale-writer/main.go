// Command stale-writer tells the classic story of a lock without fencing,
// and shows fenced stopping it:
//
//  1. worker A takes the lock "orders" and writes the key "orders";
//  2. A is paused (a GC pause, SIGSTOP, a VM migration) past its TTL;
//  3. worker B takes the lock over and writes;
//  4. A wakes up, still believing it holds the lock, and writes: the
//     resource rejects the write with 409, because A's token is older than
//     the one it has already seen;
//  5. A acquires again and writes with a fresh token.
//
// The resource is the fenced server's own key-value store, written with
// plain HTTP and the X-Fencing-Token header, as any service would be.
//
// Run it with no arguments to use a throwaway in-process server, or point it
// at yours:
//
//	go run ./examples/stale-writer
//	FENCED_ENDPOINTS=127.0.0.1:7700 go run ./examples/stale-writer
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/server"
)

const (
	lockName = "orders" // the lock guarding the key "orders" (the kv scope rule)
	ttl      = 1 * time.Second
)

func main() {
	endpoint := os.Getenv("FENCED_ENDPOINTS")
	if endpoint == "" {
		stop, addr, err := startServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "start server:", err)
			os.Exit(1)
		}
		defer stop()
		endpoint = addr
	}
	if err := run(os.Stdout, strings.Split(endpoint, ",")[0]); err != nil {
		fmt.Fprintln(os.Stderr, "stale-writer:", err)
		os.Exit(1)
	}
}

// run tells the story against the server at endpoint.
func run(out io.Writer, endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New([]string{endpoint}, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	defer c.Close()
	const key = lockName
	say := func(who, format string, args ...any) {
		fmt.Fprintf(out, "%-9s %s\n", who, fmt.Sprintf(format, args...))
	}

	a, err := c.Acquire(ctx, lockName, ttl)
	if err != nil {
		return fmt.Errorf("A acquire: %w", err)
	}
	say("worker A", "acquired %q with token %d (ttl %v)", lockName, a.Token(), ttl)
	if _, err := write(ctx, endpoint, key, a.Token(), "order 1 shipped by A"); err != nil {
		return err
	}
	say("worker A", "wrote %q with token %d -> accepted", key, a.Token())

	say("worker A", "...paused (GC, SIGSTOP, VM migration) for longer than its ttl...")
	<-a.Context().Done()
	say("", "(A's lease has run out; A does not know, it is paused)")

	var b *client.Lease
	for b == nil {
		b, err = c.Acquire(ctx, lockName, 30*time.Second)
		if err != nil && !errors.Is(err, fence.ErrNotGranted) {
			return fmt.Errorf("B acquire: %w", err)
		}
		if b == nil {
			time.Sleep(20 * time.Millisecond) // the server expires A's grant after its TTL
		}
	}
	say("worker B", "acquired %q with token %d", lockName, b.Token())
	if _, err := write(ctx, endpoint, key, b.Token(), "order 1 refunded by B"); err != nil {
		return err
	}
	say("worker B", "wrote %q with token %d -> accepted", key, b.Token())

	say("worker A", "wakes up, still believes it holds the lock, writes with token %d", a.Token())
	status, err := write(ctx, endpoint, key, a.Token(), "order 1 shipped AGAIN by A")
	if err != nil {
		return err
	}
	say("resource", "-> %s", status)
	say("", "(the stale write never reached the data)")

	b.Release(ctx)
	a2, err := c.Acquire(ctx, lockName, ttl)
	if err != nil {
		return fmt.Errorf("A re-acquire: %w", err)
	}
	say("worker A", "acquires again: token %d", a2.Token())
	if _, err := write(ctx, endpoint, key, a2.Token(), "order 2 shipped by A"); err != nil {
		return err
	}
	say("worker A", "wrote %q with token %d -> accepted", key, a2.Token())

	e, err := c.KVGet(ctx, key)
	if err != nil {
		return err
	}
	say("final", "%q = %q (version %d, token %d)", key, e.Value, e.Version, e.Token)
	return a2.Release(ctx)
}

// write PUTs value to the server's fenced kv with the HTTP convention and
// returns a description of the response for a 409; other failures are
// errors.
func write(ctx context.Context, endpoint, key string, t fence.Token, value string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+endpoint+"/v1/kv/"+key, bytes.NewReader([]byte(value)))
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Fencing-Token", t.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusOK:
		return "200 OK", nil
	case http.StatusConflict:
		return fmt.Sprintf("409 Conflict, X-Required-Token: %s, %s", resp.Header.Get("X-Required-Token"), strings.TrimSpace(string(body))), nil
	}
	return "", fmt.Errorf("PUT %s: %s: %s", key, resp.Status, body)
}

// startServer runs a throwaway single-node server on a free port.
func startServer() (stop func(), addr string, err error) {
	dir, err := os.MkdirTemp("", "fenced-example-")
	if err != nil {
		return nil, "", err
	}
	cfg := server.DefaultConfig()
	cfg.Raft.DataDir = dir
	cfg.Listen, cfg.Raft.PeerListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.Start(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		os.RemoveAll(dir)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + srv.Addr() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, srv.Addr(), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	return nil, "", fmt.Errorf("server not ready after 20s")
}
