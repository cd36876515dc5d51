// Command scale measures what fenced's figures cost as the number of live
// sessions grows: for each size N, a fresh single-node `fenced serve`
// process, N holders (a session and a lock each, kept alive by the SDK's
// keep-alives), then
//
//   - at rest: the server's RSS and CPU over --rest, with the renewals the
//     keep-alives carry;
//   - a snapshot (SIGUSR1): its size, the time to encode and to write it;
//   - a restart: --tail grants and releases committed past the snapshot,
//     kill -9, start: the time until /readyz answers and until the state
//     holds every session and lock;
//   - catch-up: --members new members added one at a time (fenced serve
//     --join, cluster add): the time until each one has applied a command
//     committed after its add, so the leader's whole state.
//
// It prints one JSON object a row on stdout as the row completes, then the
// table in markdown (docs/benchmarks.md, "The cost of scale"):
//
//	go run ./bench/scale --sessions 1000,10000,100000,1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/bench"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("sessions", "1000,10000,100000", "comma-separated numbers of live sessions, one row each, 1–1000000")
	bin := fs.String("fenced", "", "the fenced binary to run (default: built from this source tree)")
	dir := fs.String("dir", "", "where the data dirs and logs go (default: a temporary directory, removed at the end unless a row failed); a row's directory is removed when it succeeds")
	ttl := fs.Duration("ttl", 60*time.Second, "every session's TTL; the keep-alives renew each every TTL/3")
	rest := fs.Duration("rest", 30*time.Second, "how long the server's CPU is sampled at rest")
	clients := fs.Int("clients", 128, "holders opened at a time, 1–10000")
	connections := fs.Int("connections", 1, "client connections (each with one keep-alive stream) the holders share, 1–1024")
	members := fs.Int("members", 2, "members added to the cluster one at a time after the restart, 0–2")
	tail := fs.Int("tail", 500, "grants (and as many releases) committed past the snapshot before the kill, 0–100000")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long any one step may take")
	out := fs.String("out", "", "also write the rows to FILE as a JSON array")
	serveArgs := fs.String("serve-args", "", "more flags for the first member's fenced serve, space-separated (e.g. \"--pprof 127.0.0.1:6060\" to profile it)")
	serveEnv := fs.String("serve-env", "", "environment variables for every fenced serve, space-separated (e.g. \"GOMEMLIMIT=1800MiB\")")
	render := fs.String("render", "", "measure nothing: print the table of the rows in FILE (this program's JSON lines or --out array)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render != "" {
		rows, err := readRows(*render)
		if err != nil {
			return err
		}
		return writeTable(stdout, rows)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ns, err := parseSizes(*sizes)
	if err != nil {
		return err
	}
	switch {
	case *members < 0 || *members > 2:
		return fmt.Errorf("--members %d: want 0–2", *members)
	case *tail < 0 || *tail > 100000:
		return fmt.Errorf("--tail %d: want 0–100000", *tail)
	case *rest <= 0:
		return fmt.Errorf("--rest %v: want more than 0", *rest)
	case *timeout <= 0:
		return fmt.Errorf("--timeout %v: want more than 0", *timeout)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *dir == "" {
		d, merr := os.MkdirTemp("", "fenced-scale-")
		if merr != nil {
			return merr
		}
		// Kept when a row fails: its logs are what tells why.
		defer func() {
			if err == nil {
				err = os.RemoveAll(d)
			}
		}()
		*dir = d
	}
	if *bin == "" {
		if *bin, err = buildFenced(*dir); err != nil {
			return err
		}
	}
	cfg := config{bin: *bin, dir: *dir, ttl: *ttl, rest: *rest, clients: *clients, connections: *connections, members: *members, tail: *tail, timeout: *timeout, serveArgs: strings.Fields(*serveArgs), serveEnv: strings.Fields(*serveEnv), requestTimeout: 30 * time.Second,
		progress: func(format string, args ...any) {
			fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
		}}
	var rows []Row
	enc := json.NewEncoder(stdout)
	for _, n := range ns {
		row, err := measure(ctx, cfg, n)
		if err != nil {
			return fmt.Errorf("%d sessions: %w (the servers' and the clients' logs are kept in %s)", n, err, *dir)
		}
		rows = append(rows, row)
		if err := enc.Encode(row); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout)
	if err := writeTable(stdout, rows); err != nil {
		return err
	}
	if *out != "" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}

// readRows reads the rows in path: a JSON array (--out) or one object a
// line (stdout).
func readRows(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	dec := json.NewDecoder(f)
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err == io.EOF {
			return rows, nil
		} else if err != nil {
			return rows, fmt.Errorf("%s: %w", path, err)
		}
		if len(v) > 0 && v[0] == '[' {
			var more []Row
			if err := json.Unmarshal(v, &more); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			rows = append(rows, more...)
			continue
		}
		var r Row
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, r)
	}
}

// parseSizes parses --sessions.
func parseSizes(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1000000 {
			return nil, fmt.Errorf("--sessions: %q is not a number of sessions from 1 to 1000000", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// buildFenced builds ./cmd/fenced of this source tree into dir.
func buildFenced(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	path := filepath.Join(dir, "fenced")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/fenced")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/fenced: %w\n%s", err, out)
	}
	return path, nil
}

// localStatus asks the member at addr for its own indexes.
func localStatus(ctx context.Context, addr string) (*fencedv1.ClusterStatusResponse, error) {
	c := fencedv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+addr)
	req := connect.NewRequest(&fencedv1.ClusterStatusRequest{})
	req.Header().Set("X-Fenced-Local", "1")
	req.Header().Set("X-Fenced-Probe", "1")
	resp, err := c.Status(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// clientLogger writes the SDK's log lines (keep-alive streams failing and
// reopening, failovers during the restart) to path, as JSON.
func clientLogger(path string) (*slog.Logger, func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(slog.NewJSONHandler(f, nil)), f.Close, nil
}

func cpuOf(pid int) time.Duration { return bench.ProcessCPU(pid) }

// clientCPU is the CPU time this process alone has used: the holders'
// clients. Not bench.ProcessCPU(os.Getpid()), which counts the process's
// live descendants too, and the servers this program starts are its
// children.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rssOf(pid int) int64 { return bench.ProcessRSS(pid) }
