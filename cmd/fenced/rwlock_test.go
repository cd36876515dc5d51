package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// A continuous stream of readers (a new one every 300ms, each holding
// 1.5s, so several hold the lock at any moment) cannot keep a waiting
// writer out for longer than the readers holding it when it queued: the
// writer, a `fenced rwlock write` process against a real server process,
// is admitted within that hold time (plus a generous bound for a loaded
// machine), and no reader that asked after the writer queued is admitted
// before it. Without the one FIFO queue the writer would wait as long as
// the stream runs.
func TestRWLock_ReaderStreamCannotStarveWriter(t *testing.T) {
	const (
		every = 300 * time.Millisecond
		hold  = 1500 * time.Millisecond
		slack = 6 * time.Second // a loaded machine: process start, commits
	)
	srv := proctest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New([]string{srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	type read struct {
		asked   time.Time
		token   fence.Token
		granted time.Time
	}
	var (
		mu    sync.Mutex
		reads []read
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	reader := func() {
		defer wg.Done()
		s, err := c.NewSession(ctx, client.WithTTL(10*time.Second))
		if err != nil {
			t.Errorf("reader session: %v", err)
			return
		}
		defer s.Close(context.Background())
		m := client.NewRWMutex(s, "fair")
		asked := time.Now()
		g, err := m.RLock(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("RLock: %v", err)
			}
			return
		}
		mu.Lock()
		reads = append(reads, read{asked: asked, token: g.Token(), granted: time.Now()})
		mu.Unlock()
		time.Sleep(hold)
		m.Unlock(context.Background())
	}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			wg.Add(1)
			go reader()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	// Let the stream fill up: several readers hold the lock at once.
	eventually(t, "several readers hold the lock", 30*time.Second, func() bool {
		st, err := c.DescribeRWLock(ctx, "fair")
		return err == nil && len(st.Readers) >= 3
	})
	writer := startFenced(t, nil, "rwlock", "write", "fair", "--wait", "60s", "--endpoints", srv.Addr, "--", "sh", "-c", `echo "$FENCED_TOKEN $FENCED_KIND"`)
	var queued time.Time
	eventually(t, "the writer queued", 30*time.Second, func() bool {
		st, err := c.DescribeRWLock(ctx, "fair")
		if err != nil {
			return false
		}
		for _, w := range st.Waiters {
			if w.Write {
				queued = time.Now()
				return true
			}
		}
		return strings.TrimSpace(writer.stdout.String()) != ""
	})
	if queued.IsZero() {
		t.Fatal("the writer was granted before it was seen waiting: the stream had not filled the lock")
	}
	var wtok fence.Token
	eventually(t, "the writer's grant", hold+slack, func() bool {
		f := strings.Fields(writer.stdout.String())
		if len(f) != 2 {
			return false
		}
		var err error
		wtok, err = fence.ParseToken(f[0])
		if err != nil || f[1] != "write" {
			t.Fatalf("writer printed %q, want its token and kind write", writer.stdout.String())
		}
		return true
	})
	delay := time.Since(queued)
	if code := writer.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("fenced rwlock write exit %d: %s", code, writer.stderr.String())
	}
	// Let a few readers that asked after the writer in.
	time.Sleep(3 * every)
	eventually(t, "readers after the writer", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range reads {
			if r.asked.After(queued) {
				n++
			}
		}
		return n >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	var before, after int
	for _, r := range reads {
		if r.asked.After(queued) {
			after++
			if r.token < wtok {
				t.Errorf("a reader that asked %v after the writer queued was admitted before it (token %d < writer's %d)", r.asked.Sub(queued), r.token, wtok)
			}
		} else if r.token < wtok {
			before++
		}
	}
	t.Logf("writer admitted %v after it queued (readers hold %v); %d reads before it, %d asked after it queued, all admitted after it",
		delay.Round(time.Millisecond), hold, before, after)
}

// fenced rwlock read and write run CMD under the grant with its token and
// kind, exit with CMD's status and release the grant; describe shows
// holders and waiters; malformed names and unknown modes are refused with
// a usage error and change nothing.
func TestRWLock_CLI(t *testing.T) {
	srv := proctest.StartServer(t)
	ep := "--endpoints=" + srv.Addr
	out, errOut, code := runFenced(t, "rwlock", "read", "cfg", ep, "--", "sh", "-c", `echo "$FENCED_LOCK $FENCED_KIND $FENCED_TOKEN"; exit 7`)
	if f := strings.Fields(out); code != 7 || len(f) != 3 || f[0] != "cfg" || f[1] != "read" {
		t.Fatalf("rwlock read: exit %d, %q, %s; want 7 and name, kind read, token", code, out, errOut)
	}
	out, _, code = runFenced(t, "rwlock", "write", "cfg", ep, "--", "sh", "-c", `echo "$FENCED_KIND"`)
	if code != 0 || strings.TrimSpace(out) != "write" {
		t.Fatalf("rwlock write after the reader exited: exit %d, %q", code, out)
	}
	holder := startFenced(t, nil, "rwlock", "read", "cfg", "--ttl", "30s", ep, "--", "sh", "-c", `echo "$FENCED_TOKEN"; sleep 60`)
	eventually(t, "the reader holds", 20*time.Second, func() bool { return strings.TrimSpace(holder.stdout.String()) != "" })
	if _, _, code := runFenced(t, "rwlock", "write", "cfg", "--wait", "300ms", ep, "--", "true"); code != 3 {
		t.Errorf("rwlock write beside a reader with --wait 300ms: exit %d, want 3", code)
	}
	out, _, code = runFenced(t, "rwlock", "describe", "cfg", "--json", ep)
	var st struct {
		Readers []struct{ Session, Token string }
		Writer  *struct{ Session, Token string }
		Waiters []struct{ Session, Mode string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Readers) != 1 || st.Writer != nil || len(st.Waiters) != 0 ||
		st.Readers[0].Token != strings.TrimSpace(holder.stdout.String()) {
		t.Fatalf("describe --json: exit %d %q; want the one reader with token %s", code, out, holder.stdout.String())
	}
	for _, bad := range [][]string{
		{"rwlock", "read", "a\nb", "--", "true"},
		{"rwlock", "write", strings.Repeat("n", 513), "--", "true"},
		{"rwlock", "read", "", "--", "true"},
		{"rwlock", "describe", "a\x7fb"},
		{"rwlock", "upgrade", "cfg", "--", "true"},
		{"rwlock", "read", "cfg"},
		{"rwlock"},
	} {
		_, errOut, code := runFenced(t, append(bad, ep)...)
		if code != 2 || errOut == "" {
			t.Errorf("fenced %q: exit %d %q, want 2 and a message", bad, code, errOut)
		}
	}
	if again, _, _ := runFenced(t, "rwlock", "describe", "cfg", "--json", ep); again != out {
		t.Fatalf("bad input changed the state:\nbefore %s\nafter  %s", out, again)
	}
	// A signal to fenced goes to CMD; fenced exits with CMD's status and
	// the grant is released.
	signalGroup(t, holder.cmd.Process.Pid, syscall.SIGTERM)
	if code := holder.wait(t, 30*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("reader after SIGTERM: exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if out, _, code := runFenced(t, "rwlock", "describe", "cfg", ep); code != 0 || !strings.Contains(out, "free") {
		t.Fatalf("describe after the reader exited: exit %d %q, want free", code, out)
	}
}
