package main

import (
	"fmt"
	"strings"

	"github.com/fenced-dev/fenced/bench"
)

// ownTable reports whether workload w has a table of its own (queue and
// limiter), not a row of the lock cycles table.
func ownTable(w bench.Workload) bool {
	return w == bench.WorkloadQueue || w == bench.WorkloadLimiter
}

// writeQueueLimiterTable writes the table of the queue and limiter cases:
// items/s (an item pushed, claimed and acked) or decisions/s (a permit
// asked for and granted) as the throughput, and the claim's or the
// decision's latency.
func writeQueueLimiterTable(b *strings.Builder, cases []benchCase, sums map[summaryKey]summary, runs int) {
	var mine []benchCase
	for _, c := range cases {
		if ownTable(c.Workload) {
			mine = append(mine, c)
		}
	}
	if len(mine) == 0 {
		return
	}
	fmt.Fprintf(b, "## Work queue and rate limiter\n\n")
	fmt.Fprintf(b, "Medians over %s. queue: every worker pushes an item to one shared queue, claims the oldest item (waiting for one, pushed by the server; Redis: a Lua LMOVE to the processing list with an INCR claim token, BLMOVE when empty) and acks it with the claim token; the throughput is items/s (pushed, claimed and acked), the latency the claim's, and every claim's token must be above the item's earlier claims' (token-order violations). limiter: every client asks one token bucket (too large to refuse) for one permit at a time; the throughput is decisions/s, the latency a decision's; fenced-batch takes %d permits per round trip (`client.WithBatch`) and hands them out locally. × redis divides the throughput by Redis's (appendfsync always, one node) in the same case, × unbatched divides fenced-batch's by fenced's one-permit-per-decision figure. queue-64-batch: every call carries %d items on every system (a push of %d; the acks of the last claim's items with the claim of up to %d next).\n\n", plural(runs, "run"), limiterBatch, queueBatch, queueBatch, queueBatch)
	fmt.Fprintf(b, "| case | system | throughput | × redis | × unbatched | latency p50 ms | latency p99 ms | cycle p99 ms | server CPU %% | server CPU µs/item | server RSS MiB | runs ok | failed calls |\n")
	fmt.Fprintf(b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range mine {
		unit := "items/s"
		if c.Workload == bench.WorkloadLimiter {
			unit = "decisions/s"
		}
		for _, t := range c.Targets {
			s := sums[summaryKey{c.ID, t}]
			if s.Runs == 0 {
				fmt.Fprintf(b, "| %s | %s | failed | | | | | | | | | 0/%d | |\n", c.ID, t, s.Failed)
				continue
			}
			errs := fmt.Sprint(s.Errors)
			if s.TokenOrderViolations > 0 {
				errs += fmt.Sprintf(", %d token-order violations", s.TokenOrderViolations)
			}
			unbatched := ""
			if c.Workload == bench.WorkloadLimiter && c.batchFor(t) > 1 {
				unbatched = ratio(s.CyclesPerS, sums, c.ID, "fenced")
			}
			fmt.Fprintf(b, "| %s | %s | %.0f %s | %s | %s | %.2f | %.2f | %.2f | %.0f | %.1f | %.0f | %d/%d | %s |\n",
				c.ID, t, s.CyclesPerS, unit, ratio(s.CyclesPerS, sums, c.ID, c.VsRedis), unbatched,
				s.P50Ms, s.P99Ms, s.CycleP99Ms, s.CPUPercent, s.CPUUsPerCycle, s.RSSMiB, s.Runs, s.Runs+s.Failed, errs)
		}
	}
	fmt.Fprintf(b, "\n")
}

// queueMethodText explains the queue and limiter cases' method, when the
// report has any.
func queueMethodText(cases []benchCase) string {
	has := false
	for _, c := range cases {
		has = has || ownTable(c.Workload)
	}
	if !has {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Work queue and rate limiter: method\n\n")
	w("- **queue** (`bench.WorkloadQueue`, queue-64): 64 workers, each a locker with a session of its own, on **one shared queue** (what an application runs: one queue of jobs, many workers); each loops push (128 bytes) → claim (visibility %v) → ack with the claim token. ", bench.QueueVisibility)
	w("fenced: the SDK's `client.Queue` (`Push`, `Claim` held by the worker's session — a waiting claim is pushed by the server —, `Claim.Ack`), one `client.Client` for all workers; every push, claim and ack is a Raft entry fsynced (on a majority with 3 nodes) before it is answered. ")
	w("Redis (appendfsync always, one node): the reliable-queue pattern — `LPUSH`; claim as one Lua script `LMOVE` queue → processing list + `INCR` of the token counter + `HSET` of the item's token (`BLMOVE`, then the token script, when the queue is empty); ack as one Lua script that `LREM`s the item from the processing list only while the hash holds its token (a stale ack changes nothing). ")
	w("Redis has no visibility timeout or redelivery (an item whose worker died stays in the processing list until a reaper the user writes moves it back), no dead-letter queue, no dedupe key, no claims tied to a session, and it does not replicate synchronously.\n")
	w("- **queue, batches** (queue-64-batch, `fenced bench --workload queue --batch %d`): the same 64 workers and queue, %d items per call on every system: each loops push of %d items in one call → one call that acks the %d (or fewer) items it claimed last and claims up to %d next (fewer when fewer are available; a fenced claim that waited is handed up to %d at once, Redis's BLMOVE moves one) → ... ; the throughput counts items acked, the latency is the claim call's per item. ", queueBatch, queueBatch, queueBatch, queueBatch, queueBatch, queueBatch)
	w("fenced: `client.Queue.PushBatch` (one Raft entry, all or none) and `AckAndClaimNextBatch` (the acks and the claim in one Raft entry, each item its own claim token). ")
	w("Redis: `LPUSH` of %d values; the ack as one Lua script doing the token-checked `LREM` of each item; the claim as one Lua script `LMOVE`-ing up to %d items, each with its own `INCR` token (`BLMOVE` of one, then the token script, when the queue is empty): three round trips per cycle to fenced's two, as in queue-64, where Redis has no ack-with-claim.\n", queueBatch, queueBatch)
	w("- **limiter** (`bench.WorkloadLimiter`, limiter-64): 64 clients, each asking one token bucket (capacity and refill 10⁹, so nothing is refused and every call is a decision written to the log) for one permit at a time. fenced: `client.Limiter.Allow` (one Raft write per decision, the leader's clock in the command); fenced-batch: the same handle with `client.WithBatch(%d, 1s)`, one Raft write per %d decisions (the documented trade-off: permits taken and not handed out are consumed, and a permit may be used up to 1 s after the server counted it). Redis: a Lua token bucket (`TIME` for the server's clock, the level in a hash, one script call per decision).\n\n", limiterBatch, limiterBatch)
	return b.String()
}
