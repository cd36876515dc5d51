package check

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// ParseFaults parses "kill,partition,...". "all" means every kind.
func ParseFaults(s string) ([]string, error) {
	if s == "all" {
		return history.AllFaults, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		known := false
		for _, k := range history.AllFaults {
			known = known || k == f
		}
		if !known {
			return nil, fmt.Errorf("unknown fault %q; want some of %s, or all", f, strings.Join(history.AllFaults, ","))
		}
		out = append(out, f)
	}
	return out, nil
}

// nemesis injects faults on a seeded schedule and records them.
type nemesis struct {
	c       *cluster
	rng     *rand.Rand
	faults  []string
	workers func() []*workerProc
	record  func(history.Op)
	ttl     time.Duration
	log     *slog.Logger
	admin   *client.Client
	mu      sync.Mutex
	stopped map[int]bool // nodes currently SIGSTOPped or killed by the nemesis
	// keys are the kv keys the workers write, which resumeProbe reads.
	keys []string
}

func newNemesis(c *cluster, seed uint64, faults []string, ttl time.Duration, workers func() []*workerProc, record func(history.Op)) (*nemesis, error) {
	admin, err := c.sec.adminClient(c.endpoints())
	if err != nil {
		return nil, err
	}
	return &nemesis{c: c, rng: rand.New(rand.NewPCG(seed, 0xfa17)), faults: faults, workers: workers, record: record, ttl: ttl,
		log: slog.New(slog.NewTextHandler(os.Stderr, nil)), admin: admin, stopped: map[int]bool{}}, nil
}

func (n *nemesis) note(fault, target, outcome, errText string) {
	now := time.Now().UnixNano()
	n.record(history.Op{Process: history.NemesisProcess, Kind: history.OpFault, Fault: fault, Target: target, Outcome: outcome, Invoke: now, Complete: now, Error: errText})
}

// run injects one fault after another until ctx ends, each held for a
// while and then healed, with quiet gaps between them.
func (n *nemesis) run(ctx context.Context) {
	if len(n.faults) == 0 {
		<-ctx.Done()
		return
	}
	d := &deck{rng: n.rng, kinds: n.faults}
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(500+n.rng.IntN(1500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		fault := d.next()
		hold := time.Duration(1000+n.rng.IntN(2500)) * time.Millisecond
		n.inject(ctx, fault, hold)
	}
}

// deck deals fault kinds: every enabled kind once, in a seeded random
// order, before any is repeated, so a short run still injects each kind.
// After the first round each round deals pause-client (the stale writer,
// what fencing is for) once more.
type deck struct {
	rng    *rand.Rand
	kinds  []string
	rounds int
	hand   []string
}

func (d *deck) next() string {
	if len(d.hand) == 0 {
		d.hand = append([]string(nil), d.kinds...)
		if d.rounds > 0 && len(d.kinds) > 1 && slices.Contains(d.kinds, history.FaultPauseClient) {
			d.hand = append(d.hand, history.FaultPauseClient)
		}
		d.rng.Shuffle(len(d.hand), func(i, j int) { d.hand[i], d.hand[j] = d.hand[j], d.hand[i] })
		d.rounds++
	}
	k := d.hand[0]
	d.hand = d.hand[1:]
	return k
}

// leader returns the index of the current leader, or -1.
func (n *nemesis) leader(ctx context.Context) int {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := n.admin.ClusterStatus(cctx)
	if err != nil {
		return -1
	}
	for i, nd := range n.c.nodes {
		if nd.id == st.Leader {
			return i
		}
	}
	return -1
}

// pickNode picks the leader half of the time (faults there matter most),
// otherwise a random node.
func (n *nemesis) pickNode(ctx context.Context) int {
	if n.rng.IntN(2) == 0 {
		if l := n.leader(ctx); l >= 0 {
			return l
		}
	}
	return n.rng.IntN(len(n.c.nodes))
}

func (n *nemesis) inject(ctx context.Context, fault string, hold time.Duration) {
	switch fault {
	case history.FaultPauseClient:
		ws := n.workers()
		if len(ws) == 0 {
			return
		}
		// Prefer a worker that holds a lock right now: paused past the TTL,
		// it is the classic stale writer.
		w := ws[n.rng.IntN(len(ws))]
		for _, i := range n.rng.Perm(len(ws)) {
			if ws[i].holding() {
				w = ws[i]
				break
			}
		}
		hold = n.ttl + time.Duration(n.rng.IntN(2000))*time.Millisecond
		n.note(fault, w.id, "start", "")
		w.signal(syscall.SIGSTOP)
		sleepCtx(ctx, hold)
		w.signal(syscall.SIGCONT)
		n.note(fault, w.id, "healed", "")
	case history.FaultPauseServer:
		i := n.pickNode(ctx)
		n.note(fault, n.c.nodes[i].id, "start", "")
		n.c.signal(i, syscall.SIGSTOP)
		sleepCtx(ctx, hold)
		probed := n.resumeProbe(ctx, i)
		n.c.signal(i, syscall.SIGCONT)
		probed()
		n.note(fault, n.c.nodes[i].id, "healed", "")
	case history.FaultKill:
		i := n.pickNode(ctx)
		n.note(fault, n.c.nodes[i].id, "start", "")
		n.c.kill(i)
		sleepCtx(ctx, hold)
		err := n.c.start(i, true)
		n.note(fault, n.c.nodes[i].id, "healed", errText(err))
	case history.FaultPartition:
		target := n.partition(ctx)
		n.note(fault, target, "start", "")
		sleepCtx(ctx, hold)
		n.c.heal()
		n.note(fault, target, "healed", "")
	case history.FaultTransfer:
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		leader, err := n.admin.TransferLeader(cctx, "")
		cancel()
		n.note(fault, leader, "start", errText(err))
		n.note(fault, leader, "healed", "")
	case history.FaultSkew:
		i := n.pickNode(ctx)
		rate := []string{"0.5", "2"}[n.rng.IntN(2)]
		target := n.c.nodes[i].id + " clock x" + rate
		n.note(fault, target, "start", "")
		n.c.kill(i)
		n.c.nodes[i].extra = []string{"--test-clock-rate", rate}
		err := n.c.start(i, true)
		sleepCtx(ctx, hold+2*time.Second)
		n.c.kill(i)
		n.c.nodes[i].extra = nil
		if e := n.c.start(i, true); err == nil {
			err = e
		}
		n.note(fault, target, "healed", errText(err))
	case history.FaultMembership:
		n.membership(ctx, fault)
	}
}

// partition cuts the links of a random kind of partition and names it.
func (n *nemesis) partition(ctx context.Context) string {
	nodes := len(n.c.nodes)
	set := map[int]bool{}
	switch n.rng.IntN(3) {
	case 0: // isolate the leader
		l := n.leader(ctx)
		if l < 0 {
			l = 0
		}
		set[l] = true
		n.c.isolate(set)
		return "isolate " + n.c.nodes[l].id
	case 1: // a random minority
		for _, i := range n.rng.Perm(nodes)[:(nodes-1)/2] {
			set[i] = true
		}
		n.c.isolate(set)
		return "minority " + n.names(set)
	default: // one-way: a node's messages to another are dropped
		i := n.rng.IntN(nodes)
		j := (i + 1 + n.rng.IntN(nodes-1)) % nodes
		n.c.oneWay(i, j)
		return fmt.Sprintf("one-way %s->%s", n.c.nodes[i].id, n.c.nodes[j].id)
	}
}

func (n *nemesis) names(set map[int]bool) string {
	var ids []string
	for i := range set {
		ids = append(ids, n.c.nodes[i].id)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// membership removes a follower, wipes its data dir (a lost disk), starts
// it fresh with --join and adds it back: it catches up from the leader.
func (n *nemesis) membership(ctx context.Context, fault string) {
	if len(n.c.nodes) < 3 {
		return
	}
	l := n.leader(ctx)
	if l < 0 {
		return
	}
	i := (l + 1 + n.rng.IntN(len(n.c.nodes)-1)) % len(n.c.nodes)
	nd := n.c.nodes[i]
	n.note(fault, nd.id, "start", "")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := n.admin.RemoveMember(cctx, nd.id)
	if err == nil {
		n.c.kill(i)
		os.RemoveAll(nd.dataDir)
		if err = n.c.start(i, false); err == nil {
			err = n.admin.AddMember(cctx, nd.id, nd.peer)
		}
	}
	n.note(fault, nd.id, "healed", errText(err))
}

// healAll ends every fault: links restored, every node running (restarted
// without fault flags when needed) and a member.
func (n *nemesis) healAll(ctx context.Context) error {
	n.c.heal()
	for i := range n.c.nodes {
		n.c.signal(i, syscall.SIGCONT)
	}
	for _, w := range n.workers() {
		w.signal(syscall.SIGCONT)
	}
	var errs []string
	for i, nd := range n.c.nodes {
		if err := n.c.waitReady(ctx, i, 5*time.Second); err != nil {
			n.c.kill(i)
			nd.extra = nil
			if err := n.c.start(i, true); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	for i := range n.c.nodes {
		if err := n.c.waitReady(ctx, i, 60*time.Second); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("recovery: %s", strings.Join(errs, "; "))
	}
	return nil
}
