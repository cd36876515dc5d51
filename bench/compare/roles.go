package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// roleCPU splits the server CPU of one measurement of a multi-node target
// by Raft role: the leader does the proposing and answers the clients, the
// followers append and apply what it replicates.
type roleCPU struct {
	// Leader is the index of the node that led before and after the run.
	Leader int `json:"leader"`
	// LeaderUsPerCycle is the leader's CPU time per cycle in microseconds;
	// FollowerUsPerCycle that of one follower (the mean of the followers),
	// BusiestFollowerUsPerCycle that of the follower that used the most (a
	// follower that clients connect to also forwards their calls).
	LeaderUsPerCycle          float64 `json:"leader_us_per_cycle"`
	FollowerUsPerCycle        float64 `json:"follower_us_per_cycle"`
	BusiestFollowerUsPerCycle float64 `json:"busiest_follower_us_per_cycle"`
}

// leaderIndex returns the index of c's leading node, or -1 when c has one
// node, its kind has no role to ask for, or no node says it leads. fenced
// says "ok: leader" on /readyz; etcd exports etcd_server_is_leader 1.
func (c *cluster) leaderIndex() int {
	if len(c.procs) < 2 {
		return -1
	}
	path, mark := "", ""
	switch c.target.Kind {
	case "fenced":
		path, mark = "/readyz", "ok: leader"
	case "etcd":
		path, mark = "/metrics", "\netcd_server_is_leader 1\n"
	default:
		return -1
	}
	cl := http.Client{Timeout: 2 * time.Second}
	for i, ep := range c.endpoints {
		res, err := cl.Get("http://" + ep + path)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains("\n"+string(body), mark) {
			return i
		}
	}
	return -1
}

// rolesOf returns r's server CPU per role when leader (the same before and
// after the run) is known and the usage was sampled per process.
func rolesOf(before, after int, r *bench.Result) *roleCPU {
	if before < 0 || before != after || r == nil || r.Server == nil || r.CyclesPerS <= 0 {
		return nil
	}
	per := r.Server.CPUPercentPerPID
	if before >= len(per) || len(per) < 2 {
		return nil
	}
	us := func(pct float64) float64 { return pct / 100 * 1e6 / r.CyclesPerS }
	var followers, busiest float64
	for i, p := range per {
		if i != before {
			followers += p
			busiest = max(busiest, p)
		}
	}
	return &roleCPU{
		Leader:                    before,
		LeaderUsPerCycle:          us(per[before]),
		FollowerUsPerCycle:        us(followers / float64(len(per)-1)),
		BusiestFollowerUsPerCycle: us(busiest),
	}
}

// writeRoleTable writes the server CPU per cycle of the leader and of one
// follower for the cases run on multi-node targets, medians over runs.
func writeRoleTable(b *strings.Builder, cases []benchCase, ms []measurement) {
	type row struct {
		caseID, target            string
		leader, follower, busiest []float64
	}
	var rows []row
	for _, c := range cases {
		for _, name := range c.Targets {
			if t, ok := targetByName(name); !ok || t.Nodes < 2 {
				continue
			}
			r := row{caseID: c.ID, target: name}
			for _, m := range ms {
				if m.Case != c.ID || m.Target != name || m.Roles == nil || m.Error != "" {
					continue
				}
				// From the per-process figures, so that a report
				// rendered again from results.json computes them alike.
				if ro := rolesOf(m.Roles.Leader, m.Roles.Leader, m.Result); ro != nil {
					r.leader = append(r.leader, ro.LeaderUsPerCycle)
					r.follower = append(r.follower, ro.FollowerUsPerCycle)
					r.busiest = append(r.busiest, ro.BusiestFollowerUsPerCycle)
				}
			}
			if len(r.leader) > 0 {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "### Server CPU per role, 3 nodes\n\n")
	fmt.Fprintf(b, "The server CPU µs/cycle of the table above split by Raft role (medians over the runs in which the same node led before and after the measurement): the leader's, one follower's (the mean of the followers) and the busiest follower's (a follower the clients connect to also forwards their calls to the leader). Every node shares this machine's cores, so a follower's CPU is taken from the leader's.\n\n")
	fmt.Fprintf(b, "| case | system | leader CPU µs/cycle | follower CPU µs/cycle | busiest follower µs/cycle | runs |\n")
	fmt.Fprintf(b, "|---|---|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %.0f | %.0f | %.0f | %d |\n", r.caseID, r.target, median(r.leader), median(r.follower), median(r.busiest), len(r.leader))
	}
	fmt.Fprintf(b, "\n")
}
