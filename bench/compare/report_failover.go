package main

import (
	"fmt"
	"strings"
)

// writeFailoverTable writes the table of the election-failover case.
func writeFailoverTable(b *strings.Builder, cases []benchCase, sums map[summaryKey]summary, st settings) {
	for _, c := range cases {
		if c.Workload != workloadElection {
			continue
		}
		fmt.Fprintf(b, "## Election failover\n\n")
		fmt.Fprintf(b, "Each measurement starts the system afresh and a chain of candidate processes (`compare candidate`, each its own process using the system's election through its client library, session TTL %v): the first leads; then %d times the next candidate starts and is confirmed waiting in line by the server, the leader's process is killed with SIGKILL, and the failover is the time from the kill to the line in which the next candidate prints its term token (a new leader before the kill fails the measurement). The figure is the median over %s of each run's median; min and max are single failovers. × etcd divides by etcd's median (below 1: faster). A killed process renews nothing, so each system waits for the session or lease to run out: the failover is bounded below by what is left of the TTL since the last renewal (every TTL/3 in all three libraries), not by the protocol.\n\n", st.ElectionTTL, c.Failovers, plural(st.Runs, "run"))
		fmt.Fprintf(b, "| case | system | failover median ms | × etcd | min ms | max ms | failovers | over 2×TTL | runs ok | token-order violations |\n")
		fmt.Fprintf(b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		base := sums[summaryKey{c.ID, c.VsEtcd}]
		var slow []string
		for _, t := range c.Targets {
			s := sums[summaryKey{c.ID, t}]
			if s.Runs == 0 {
				fmt.Fprintf(b, "| %s | %s | failed | | | | | | 0/%d | |\n", c.ID, t, s.Failed)
				continue
			}
			x := ""
			if base.Runs > 0 && base.FailoverMs > 0 {
				x = fmt.Sprintf("%.2f", s.FailoverMs/base.FailoverMs)
			}
			fmt.Fprintf(b, "| %s | %s | %.0f | %s | %.0f | %.0f | %d | %d | %d/%d | %d |\n", c.ID, t, s.FailoverMs, x, s.FailoverMinMs, s.FailoverMaxMs, s.Failovers, s.SlowFailovers, s.Runs, s.Runs+s.Failed, s.TokenOrderViolations)
			if s.SlowFailovers > 0 {
				slow = append(slow, t)
			}
		}
		fmt.Fprintf(b, "\n")
		if len(slow) > 0 {
			fmt.Fprintf(b, "Failovers over twice the TTL (%s) mean that the expiry of the killed leader's session or the notice to the next candidate came late; they were not diagnosed. They can move a run's median (each run's median and every single failover are in results.json); the min and max columns show the spread.\n\n", strings.Join(slow, ", "))
		}
	}
}
