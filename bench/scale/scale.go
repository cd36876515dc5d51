package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/launch"
)

// Row is what one size measured. Times are in seconds unless the name
// says ms.
type Row struct {
	Sessions int     `json:"sessions"`
	TTLS     float64 `json:"ttl_s"`
	// Load is the machine's load averages (1, 5, 15 min) when the row
	// started.
	Load string `json:"load"`
	// Env is the servers' extra environment (--serve-env), if any.
	Env []string `json:"env,omitempty"`

	// OpenS is how long opening the holders took (a session and a lock
	// each, Clients at a time).
	OpenS float64 `json:"open_s"`

	// At rest: every holder open and kept alive by its keep-alives, for
	// RestS. RenewalsPerS is the renewals the keep-alives carry, from
	// their schedule (each session renewed every TTL/3);
	// RenewalsCountedPerS those the server counted over the rest
	// (fenced_session_renewals_total; 0 from a server without it).
	RestS        float64 `json:"rest_s"`
	RSSMiB       float64 `json:"rss_mib"`
	RSSBeforeMiB float64 `json:"rss_before_mib"`
	// HeapMiB is the Go heap in use (go_memstats_heap_inuse_bytes) at the
	// end of the rest, part of RSSMiB.
	HeapMiB             float64 `json:"heap_mib"`
	BytesPerSession     float64 `json:"bytes_per_session"`
	CPUPercent          float64 `json:"cpu_percent"`
	RenewalsPerS        float64 `json:"renewals_per_s"`
	RenewalsCountedPerS float64 `json:"renewals_counted_per_s,omitempty"`
	ClientCPUPercent    float64 `json:"client_cpu_percent"`

	// The snapshot taken at rest (SIGUSR1): its size, the time the state
	// took to encode (applies wait for it) and to write and fsync.
	SnapshotIndex     uint64  `json:"snapshot_index"`
	SnapshotBytes     int64   `json:"snapshot_bytes"`
	SnapshotEncodeMs  float64 `json:"snapshot_encode_ms"`
	SnapshotPersistMs float64 `json:"snapshot_persist_ms"`

	// The restart: kill -9 after TailCommands more commands were
	// committed past the snapshot, then start. ReadyS is from the kill
	// to /readyz answering 200, AllS to the state holding every session
	// and lock; RestoreMs is the snapshot's restore in it.
	TailCommands    int     `json:"tail_commands"`
	RestartReadyS   float64 `json:"restart_ready_s"`
	RestartAllS     float64 `json:"restart_all_s"`
	RestoreMs       float64 `json:"restore_ms"`
	RestartedRSSMiB float64 `json:"restarted_rss_mib"`

	// CatchUpS is, for each member added to the cluster in turn, the time
	// from `cluster add` until it has applied a command committed after
	// the add (so the whole state before it); CatchUpSnapshot whether it
	// caught up by installing a snapshot.
	CatchUpS        []float64 `json:"catch_up_s"`
	CatchUpSnapshot []bool    `json:"catch_up_snapshot"`
	// CatchUpError is why a member did not catch up, if one did not.
	CatchUpError string `json:"catch_up_error,omitempty"`

	// SessionsAtEnd is the leader's live sessions at the end: N when no
	// holder was lost on the way.
	SessionsAtEnd int `json:"sessions_at_end"`
}

// config is what every row shares.
type config struct {
	bin         string
	dir         string
	ttl         time.Duration
	rest        time.Duration
	clients     int
	connections int
	members     int
	tail        int
	timeout     time.Duration
	serveArgs   []string // more flags for the first member
	serveEnv    []string // environment of every member
	// requestTimeout is the holders' clients' (30s in the command).
	requestTimeout time.Duration
	progress       func(format string, args ...any)
}

// measure runs one row: a fresh single-node cluster in a directory of its
// own, n holders, and the measurements in order.
func measure(ctx context.Context, cfg config, n int) (row Row, err error) {
	row = Row{Sessions: n, TTLS: cfg.ttl.Seconds(), Load: loadAvg(), Env: cfg.serveEnv}
	dir, err := os.MkdirTemp(cfg.dir, fmt.Sprintf("scale-%d-", n))
	if err != nil {
		return row, err
	}
	nodes, err := launch.Plan(1+cfg.members, func(id string) string { return filepath.Join(dir, id) })
	if err != nil {
		return row, err
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			if kerr := s.kill(); kerr != nil && err == nil {
				err = kerr
			}
		}
		if err == nil {
			err = os.RemoveAll(dir)
		}
	}()
	leader := &server{bin: cfg.bin, node: nodes[0], extra: append(append([]string{}, noLimits...), cfg.serveArgs...), env: cfg.serveEnv, dir: dir}
	servers = append(servers, leader)
	if err := leader.start(); err != nil {
		return row, err
	}
	if err := leader.waitReady(ctx, cfg.timeout); err != nil {
		return row, err
	}
	before := rssOf(leader.pid())

	// The clients know every member's address from the start (the new
	// members are not up yet), so that they follow the leader should it
	// move once there are members to move to.
	var endpoints []string
	for _, nd := range nodes {
		endpoints = append(endpoints, nd.Addr)
	}
	// A request timeout above the SDK's 5s gives each renewal the TTL/6
	// it may take before the keeper gives up on its stream, on a loaded
	// machine and after the restart, when every session is renewed at
	// once.
	// The SDK's log goes to client.log beside the servers' logs.
	clog, closeLog, err := clientLogger(filepath.Join(dir, "client.log"))
	if err != nil {
		return row, err
	}
	defer closeLog()
	sys, err := bench.NewFenced(endpoints, cfg.connections, client.WithLogger(clog), client.WithRequestTimeout(cfg.requestTimeout))
	if err != nil {
		return row, err
	}
	defer func() {
		// The servers go first: closing the clients closes every session
		// on the server (Client.Close), a million Raft commands; with the
		// servers gone those calls fail, within the request timeout.
		for _, s := range servers {
			_ = s.kill()
		}
		sys.Close()
	}()
	// sys's clients keep the holders alive until sys.Close; they are
	// never closed one by one: the server and its data go at the end, and
	// closing a million sessions would take minutes.
	cfg.progress("%d: opening holders", n)
	start := time.Now()
	_, err = bench.OpenHolders(ctx, sys, bench.Options{Sessions: n, Clients: cfg.clients, TTL: cfg.ttl, Progress: func(p bench.Progress) {
		if p.Elapsed/time.Second%10 == 0 {
			cfg.progress("%d: %d holders open after %v", n, p.Done, p.Elapsed.Round(time.Second))
		}
	}})
	if err != nil {
		return row, err
	}
	row.OpenS = time.Since(start).Seconds()

	// At rest.
	cfg.progress("%d: at rest for %v", n, cfg.rest)
	renewals := func() (float64, error) {
		m, err := leader.metrics(ctx, "fenced_session_renewals_total")
		return m["fenced_session_renewals_total"], err
	}
	renewed0, err0 := renewals()
	cpu0, self0, t0 := cpuOf(leader.pid()), clientCPU(), time.Now()
	if err := pause(ctx, cfg.rest); err != nil {
		return row, err
	}
	el := time.Since(t0)
	if renewed, err := renewals(); err == nil && err0 == nil {
		row.RenewalsCountedPerS = (renewed - renewed0) / el.Seconds()
	}
	row.RestS = el.Seconds()
	row.CPUPercent = 100 * float64(cpuOf(leader.pid())-cpu0) / float64(el)
	row.ClientCPUPercent = 100 * float64(clientCPU()-self0) / float64(el)
	rss := rssOf(leader.pid())
	row.RSSMiB, row.RSSBeforeMiB = mib(rss), mib(before)
	row.BytesPerSession = float64(rss-before) / float64(n)
	row.RenewalsPerS = float64(n) / (cfg.ttl / 3).Seconds()
	gm, err := leader.metrics(ctx, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return row, err
	}
	row.HeapMiB = mib(int64(gm["go_memstats_heap_inuse_bytes"]))
	cfg.progress("%d: at rest RSS %.0f MiB, heap %.0f MiB, CPU %.1f%%, client CPU %.1f%%, %.0f renewals/s counted", n, row.RSSMiB, row.HeapMiB, row.CPUPercent, row.ClientCPUPercent, row.RenewalsCountedPerS)

	// The snapshot.
	cfg.progress("%d: snapshot", n)
	c, err := client.New(endpoints, client.WithLogger(clog))
	if err != nil {
		return row, err
	}
	defer c.Close()
	if err := takeSnapshot(ctx, cfg, leader, &row); err != nil {
		return row, err
	}

	// Commands past the snapshot, then kill -9 and restart.
	if err := commitCommands(ctx, c, cfg.tail, cfg.ttl); err != nil {
		return row, err
	}
	if cfg.tail > 0 {
		row.TailCommands = 2*cfg.tail + 2
	}
	cfg.progress("%d: kill -9 and restart", n)
	killedAt := time.Now()
	if err := leader.kill(); err != nil {
		return row, err
	}
	if err := leader.start(); err != nil {
		return row, err
	}
	if err := leader.waitReady(ctx, cfg.timeout); err != nil {
		return row, err
	}
	row.RestartReadyS = time.Since(killedAt).Seconds()
	if err := waitFor(ctx, cfg.timeout, func() (bool, error) { return leader.holding(ctx, n) }); err != nil {
		return row, fmt.Errorf("after the restart: %w", err)
	}
	row.RestartAllS = time.Since(killedAt).Seconds()
	if ls, _ := leader.lines("starting restore from snapshot", "restored from snapshot"); len(ls) == 2 {
		row.RestoreMs = ms(ls[1].Time.Sub(ls[0].Time))
	}
	row.RestartedRSSMiB = mib(rssOf(leader.pid()))
	cfg.progress("%d: snapshot %d bytes, encode %.0f ms, write %.0f ms; restart ready %.1fs, all present %.1fs, restore %.0f ms", n,
		row.SnapshotBytes, row.SnapshotEncodeMs, row.SnapshotPersistMs, row.RestartReadyS, row.RestartAllS, row.RestoreMs)

	// New members catch up.
	for i := 1; i <= cfg.members; i++ {
		cfg.progress("%d: adding member %s", n, nodes[i].ID)
		s := &server{bin: cfg.bin, node: nodes[i], extra: append([]string{"--join"}, noLimits...), env: cfg.serveEnv, dir: dir}
		servers = append(servers, s)
		cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		secs, snap, err := catchUp(cctx, cfg, c, leader, s)
		cancel()
		if err != nil {
			// The row keeps what was measured before.
			row.CatchUpError = err.Error()
			cfg.progress("%d: %v", n, err)
			break
		}
		row.CatchUpS = append(row.CatchUpS, secs)
		row.CatchUpSnapshot = append(row.CatchUpSnapshot, snap)
		cfg.progress("%d: %s caught up in %.1fs", n, s.node.ID, secs)
	}
	m, err := leader.metrics(ctx, "fenced_sessions")
	if err != nil {
		return row, err
	}
	row.SessionsAtEnd = int(m["fenced_sessions"])
	return row, nil
}

// takeSnapshot has the leader take a snapshot (SIGUSR1) and fills in what
// its log says of it. A snapshot already covering the state (one raft
// took on its own) is taken again only once something new is applied, so
// the newest one covering the index at the signal is used.
func takeSnapshot(ctx context.Context, cfg config, leader *server, row *Row) error {
	st, err := localStatus(ctx, leader.node.Addr)
	if err != nil {
		return err
	}
	target := st.GetAppliedIndex()
	signalled := time.Now()
	if err := leader.signal(syscall.SIGUSR1); err != nil {
		return err
	}
	var done bool
	err = waitFor(ctx, cfg.timeout, func() (bool, error) {
		ls, err := leader.lines("raft: state encoded for a snapshot", "starting snapshot up to", "snapshot complete up to", "snapshot (SIGUSR1) not taken")
		if err != nil {
			return false, err
		}
		// The last complete snapshot at or past target, with the
		// encoding and start logged before it.
		var enc, started *logLine
		for i := range ls {
			l := &ls[i]
			switch l.Msg {
			case "raft: state encoded for a snapshot":
				enc = l
			case "starting snapshot up to":
				started = l
			case "snapshot complete up to":
				if l.Index >= target && started != nil && started.Index == l.Index {
					row.SnapshotIndex = l.Index
					row.SnapshotPersistMs = ms(l.Time.Sub(started.Time))
					if enc != nil {
						row.SnapshotEncodeMs = float64(enc.EncodeMs)
					}
					done = true
				}
			case "snapshot (SIGUSR1) not taken":
				if l.Time.After(signalled) && !done {
					// Another snapshot was under way: ask again.
					signalled = time.Now()
					if err := leader.signal(syscall.SIGUSR1); err != nil {
						return false, err
					}
				}
			}
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	row.SnapshotBytes, err = leader.snapshotSize(row.SnapshotIndex)
	return err
}

// commitCommands commits 2*n+2 commands (a session, n
// grants of 8 locks and their releases, 8 at a time, the session's close),
// so that the restart replays a log on top of the snapshot, or so that a
// new member has a command to apply. The session is closed again, so the
// state holds the holders' sessions and locks only.
func commitCommands(ctx context.Context, c *client.Client, n int, ttl time.Duration) error {
	if n == 0 {
		return nil
	}
	s, err := c.NewSession(ctx, client.WithTTL(ttl))
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := client.NewMutex(s, fmt.Sprintf("bench/scale/tail/%d", w))
			for i := w; i < n; i += 8 {
				err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(ctx)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, s.Close(ctx))...)
}

// catchUp starts s with --join, adds it to the cluster, commits a few
// commands past the add (commitCommands) and waits until s has
// applied it: s then holds the leader's whole state. (A member that
// installed a snapshot reports an applied index again only once it
// applies a command, hence the command.)
func catchUp(ctx context.Context, cfg config, c *client.Client, leader, s *server) (float64, bool, error) {
	if err := s.start(); err != nil {
		return 0, false, err
	}
	start := time.Now()
	if err := c.AddMember(ctx, s.node.ID, s.node.PeerAddr); err != nil {
		return 0, false, fmt.Errorf("add %s: %w", s.node.ID, err)
	}
	if err := commitCommands(ctx, c, 1, cfg.ttl); err != nil {
		return 0, false, fmt.Errorf("commit past the add of %s: %w", s.node.ID, err)
	}
	st, err := localStatus(ctx, leader.node.Addr)
	if err != nil {
		return 0, false, err
	}
	target := st.GetAppliedIndex()
	err = waitFor(ctx, cfg.timeout, func() (bool, error) {
		st, err := localStatus(ctx, s.node.Addr)
		if err != nil {
			return false, nil // not serving yet
		}
		return st.GetAppliedIndex() >= target, nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s catching up to index %d: %w", s.node.ID, target, err)
	}
	secs := time.Since(start).Seconds()
	ls, _ := s.lines("Installed remote snapshot")
	return secs, len(ls) > 0, nil
}

// waitFor polls done every 50ms until it reports true, fails, or d passes.
func waitFor(ctx context.Context, d time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %v", d)
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// pause sleeps for d or until ctx ends, returning ctx's error then.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// loadAvg is /proc/loadavg's three load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
