package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/internal/launch"
)

// noLimits lifts the per-source limits: every holder of the benchmark
// comes from this one machine.
//
// And it turns Raft's own snapshots off (the benchmark takes its one
// snapshot with SIGUSR1, at rest): a snapshot of a large state taken while
// holders are being opened holds up the applies, and with them the
// keep-alives' leadership checks, for its encoding time
// (docs/benchmarks.md, "The cost of scale").
var noLimits = []string{"--max-sessions-per-source", "0", "--max-grants-per-source", "0", "--max-waiters-per-source", "0", "--session-rate", "0", "--max-conns-per-source", "0",
	"--snapshot-threshold", "1000000000"}

// server is one `fenced serve` process and the log file it writes,
// started again from the same data dir after a kill.
type server struct {
	bin   string
	node  launch.Node
	extra []string // flags after ServeArgs
	env   []string // added to the environment
	dir   string   // where its log files go
	proc  *launch.Process
	log   string // the current log file
	runs  int
}

// start starts the process, writing its output to a new log file.
func (s *server) start() error {
	s.runs++
	s.log = filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", s.node.ID, s.runs))
	f, err := os.Create(s.log)
	if err != nil {
		return err
	}
	p, err := launch.Start(launch.Spec{Bin: s.bin, Args: append(s.node.ServeArgs(), s.extra...), Env: s.env, Out: f, OwnGroup: true, OnExit: func() { f.Close() }})
	if err != nil {
		f.Close()
		return err
	}
	s.proc = p
	return nil
}

// kill sends SIGKILL and waits for the process to exit.
func (s *server) kill() error {
	if s.proc == nil {
		return nil
	}
	if !s.proc.Kill(30 * time.Second) {
		return fmt.Errorf("%s did not exit within 30s of SIGKILL", s.node.ID)
	}
	s.proc = nil
	return nil
}

// pid is the running process's id.
func (s *server) pid() int { return s.proc.Pid() }

// signal sends sig to the running process.
func (s *server) signal(sig syscall.Signal) error { return s.proc.Signal(sig) }

// logLine is the part of a server log line the benchmark reads.
type logLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Index    uint64    `json:"index"`
	Bytes    int64     `json:"bytes"`
	EncodeMs int64     `json:"encode_ms"`
}

// lines returns the lines of the current log whose message is one of msgs.
func (s *server) lines(msgs ...string) ([]logLine, error) {
	f, err := os.Open(s.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseLog(f, msgs...)
}

// parseLog returns the JSON lines of r whose message is one of msgs; lines
// that are not JSON are skipped.
func parseLog(r io.Reader, msgs ...string) ([]logLine, error) {
	var out []logLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		for _, m := range msgs {
			if l.Msg == m {
				out = append(out, l)
				break
			}
		}
	}
	return out, sc.Err()
}

// waitReady waits up to d for /readyz to answer 200.
func (s *server) waitReady(ctx context.Context, d time.Duration) error {
	return s.node.WaitReady(ctx, d)
}

// metrics returns the values of the named gauges of the server's
// /metrics.
func (s *server) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.node.Addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body, names...)
}

// parseMetrics reads the samples of the named metrics (without labels)
// from a Prometheus text exposition.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return nil, fmt.Errorf("metric %s: %w", n, err)
				}
				out[n] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metric %s not served", n)
		}
	}
	return out, nil
}

// holding reports whether the server's state has at least n live sessions
// and n locks held.
func (s *server) holding(ctx context.Context, n int) (bool, error) {
	m, err := s.metrics(ctx, "fenced_sessions", "fenced_locks_held")
	if err != nil {
		return false, err
	}
	return m["fenced_sessions"] >= float64(n) && m["fenced_locks_held"] >= float64(n), nil
}

// snapshotMeta is the part of a raft snapshot's meta.json the benchmark
// reads.
type snapshotMeta struct {
	Index uint64
	Size  int64
}

// snapshotSize returns the size of the snapshot of index on disk.
func (s *server) snapshotSize(index uint64) (int64, error) {
	metas, _ := filepath.Glob(filepath.Join(s.node.DataDir, "raft", "snapshots", "*", "meta.json"))
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var m snapshotMeta
		if json.Unmarshal(b, &m) == nil && m.Index == index {
			return m.Size, nil
		}
	}
	return 0, fmt.Errorf("no snapshot of index %d in %s", index, s.node.DataDir)
}
