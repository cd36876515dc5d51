package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/fenced-dev/fenced/client"
)

// workloadElection is the election-failover case's workload. It is not a
// bench.Run workload: it needs processes to kill, which this module
// starts itself (the candidate subcommand below).
const workloadElection = "election-failover"

// electionName is the election every candidate of a measurement joins.
const electionName = "bench-election"

// failoverResult is one measurement of the election-failover case: a
// chain of candidate processes, each leader SIGKILLed once the next
// candidate waits behind it.
type failoverResult struct {
	// FailoverMs is, per kill, the time from the SIGKILL of the leading
	// process to the line in which the next candidate reports the token
	// of its new term (read by this runner from the candidate's stdout).
	FailoverMs []float64 `json:"failover_ms"`
	// MedianMs is the median of FailoverMs.
	MedianMs float64 `json:"median_ms"`
	// TTLMs is the candidates' session TTL.
	TTLMs float64 `json:"ttl_ms"`
	// TokenOrderViolations counts new leaders whose token was not above
	// the killed leader's.
	TokenOrderViolations int64 `json:"token_order_violations"`
}

// candidateLine is one line a candidate printed, with when it was read.
type candidateLine struct {
	text string
	at   time.Time
}

// candidate is one candidate process.
type candidate struct {
	cmd   *exec.Cmd
	lines chan candidateLine
}

// startCandidate starts this program as `candidate` against the target.
func startCandidate(kind string, endpoints []string, ttl time.Duration) (*candidate, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "candidate", "--system", kind, "--endpoints", strings.Join(endpoints, ","), "--ttl", ttl.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &candidate{cmd: cmd, lines: make(chan candidateLine, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- candidateLine{sc.Text(), time.Now()}
		}
		close(c.lines)
	}()
	return c, nil
}

// await returns the next line starting with word.
func (c *candidate) await(ctx context.Context, word string, limit time.Duration) (candidateLine, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return l, fmt.Errorf("candidate exited before %s", word)
			}
			if strings.HasPrefix(l.text, word) {
				return l, nil
			}
		case <-t.C:
			return candidateLine{}, fmt.Errorf("no %s from the candidate within %v", word, limit)
		case <-ctx.Done():
			return candidateLine{}, ctx.Err()
		}
	}
}

func (c *candidate) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// measureFailover runs one measurement of the election-failover case:
// candidate 0 leads; then, n times, the next candidate starts and joins
// the line behind the leader (waiting is confirmed by the server: queued
// below), the leader's process is SIGKILLed, and the time until the next
// candidate prints its term token is one failover.
func measureFailover(ctx context.Context, kind string, endpoints []string, n int, ttl time.Duration) (*failoverResult, error) {
	limit := 10*ttl + time.Minute
	leader, err := startCandidate(kind, endpoints, ttl)
	if err != nil {
		return nil, err
	}
	defer func() { leader.kill() }()
	l, err := leader.await(ctx, "LEADER", limit)
	if err != nil {
		return nil, err
	}
	last, err := tokenOf(l.text)
	if err != nil {
		return nil, err
	}
	q, err := newQueueProbe(kind, endpoints)
	if err != nil {
		return nil, err
	}
	defer q.close()
	res := &failoverResult{TTLMs: float64(ttl.Milliseconds())}
	for range n {
		next, err := startCandidate(kind, endpoints, ttl)
		if err != nil {
			return res, err
		}
		if _, err := next.await(ctx, "CAMPAIGNING", limit); err != nil {
			next.kill()
			return res, err
		}
		if err := q.waitQueued(ctx, limit); err != nil {
			next.kill()
			return res, err
		}
		killed := time.Now()
		leader.kill()
		leader = next
		l, err := next.await(ctx, "LEADER", limit)
		if err != nil {
			return res, err
		}
		if l.at.Before(killed) {
			return res, fmt.Errorf("the next candidate led (%s) before the leader's process was killed", l.text)
		}
		res.FailoverMs = append(res.FailoverMs, float64(l.at.Sub(killed).Microseconds())/1000)
		tok, err := tokenOf(l.text)
		if err != nil {
			return res, err
		}
		if tok <= last {
			res.TokenOrderViolations++
		}
		last = tok
	}
	res.MedianMs = median(res.FailoverMs)
	return res, nil
}

func tokenOf(line string) (uint64, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, fmt.Errorf("candidate printed %q, want LEADER <token>", line)
	}
	return strconv.ParseUint(f[1], 10, 64)
}

// queueProbe tells when a second candidate waits behind the leader, asked
// of the server itself, so that no kill comes before the next candidate is
// in line.
type queueProbe struct {
	queued func(ctx context.Context) (bool, error)
	close  func()
}

func newQueueProbe(kind string, endpoints []string) (*queueProbe, error) {
	switch kind {
	case "fenced":
		c, err := client.New(endpoints)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := c.NewSession(ctx)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		e := client.NewElection(s, electionName)
		return &queueProbe{
			queued: func(ctx context.Context) (bool, error) {
				st, err := e.Leader(ctx)
				return st.HasLeader() && st.Candidates >= 1, err
			},
			close: func() { _ = s.Close(context.Background()); _ = c.Close() },
		}, nil
	case "etcd":
		cli, err := newEtcdClient(endpoints)
		if err != nil {
			return nil, err
		}
		return &queueProbe{
			queued: func(ctx context.Context) (bool, error) {
				r, err := cli.Get(ctx, "/election/"+electionName+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && r.Count >= 2, err
			},
			close: func() { _ = cli.Close() },
		}, nil
	case "redis":
		// Redis has no line of waiters: a candidate that printed
		// CAMPAIGNING is already polling.
		return &queueProbe{queued: func(context.Context) (bool, error) { return true, nil }, close: func() {}}, nil
	}
	return nil, fmt.Errorf("election-failover: no candidate for %s", kind)
}

func (q *queueProbe) waitQueued(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := q.queued(ctx)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the next candidate was not in line within %v (last error: %v)", limit, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// candidateMain is `compare candidate`: one process campaigning in the
// election through the system's own API, as an application would, that
// prints CAMPAIGNING when it starts to campaign, LEADER <token> once it
// leads, and then keeps leading (its session renewed) until killed.
func candidateMain(args []string) error {
	fs := newFlagSet("candidate")
	system := fs.String("system", "", "fenced, etcd or redis")
	endpoints := fs.String("endpoints", "", "comma-separated host:port of the servers")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	eps := strings.Split(*endpoints, ",")
	ctx := context.Background()
	value := strconv.Itoa(os.Getpid())
	var lost <-chan struct{}
	switch *system {
	case "fenced":
		// The SDK's election (client.Election): a FIFO line of
		// candidates on the server, the leadership pushed to the
		// waiting Campaign call.
		c, err := client.New(eps)
		if err != nil {
			return err
		}
		s, err := c.NewSession(ctx, client.WithTTL(*ttl))
		if err != nil {
			return err
		}
		e := client.NewElection(s, electionName)
		fmt.Println("CAMPAIGNING")
		tok, err := e.Campaign(ctx, value)
		if err != nil {
			return err
		}
		fmt.Printf("LEADER %d\n", tok)
		lost = s.Done()
	case "etcd":
		// etcd's documented election, concurrency.Election: a key per
		// candidate on its session's lease, each waiting for the
		// deletion of the key just before its own. The token is the
		// leader key's create revision (Election.Rev).
		cli, err := newEtcdClient(eps)
		if err != nil {
			return err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(math.Ceil(ttl.Seconds())))))
		if err != nil {
			return err
		}
		e := concurrency.NewElection(s, "/election/"+electionName)
		fmt.Println("CAMPAIGNING")
		if err := e.Campaign(ctx, value); err != nil {
			return err
		}
		fmt.Printf("LEADER %d\n", e.Rev())
		lost = s.Done()
	case "redis":
		// Redis has no election: a leader is the holder of the lock
		// key (SET NX PX, refreshed every TTL/3), the same script lock
		// as the lock cases, and a candidate polls for it.
		r, err := NewRedis(eps[0])
		if err != nil {
			return err
		}
		l, err := r.NewLocker(ctx, 0, *ttl)
		if err != nil {
			return err
		}
		fmt.Println("CAMPAIGNING")
		tok, err := l.Lock(ctx, "election/"+electionName)
		if err != nil {
			return err
		}
		fmt.Printf("LEADER %d\n", tok)
	default:
		return fmt.Errorf("candidate: --system %q: want fenced, etcd or redis", *system)
	}
	<-lost // nil (Redis): forever
	return errors.New("candidate: leadership lost")
}

// summarizeFailover is the median over runs of each run's median
// failover, and the smallest and largest single failover.
func summarizeFailover(ms []*failoverResult) (med, lo, hi float64, n int) {
	var meds, all []float64
	for _, m := range ms {
		meds = append(meds, m.MedianMs)
		all = append(all, m.FailoverMs...)
	}
	if len(all) == 0 {
		return 0, 0, 0, 0
	}
	return median(meds), slices.Min(all), slices.Max(all), len(all)
}

// newEtcdClient connects to the etcd members at endpoints (host:port).
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	var urls []string
	for _, e := range endpoints {
		urls = append(urls, "http://"+e)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}
