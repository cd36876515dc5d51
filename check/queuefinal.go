package check

import (
	"context"
	"time"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// statsPage is the page size of the final reads of a queue (the server's
// cap on one Stats).
const statsPage = 1000

// finalQueues lists, once every fault is healed, every item left in each
// queue of the queue workload and in its dead-letter queue (process
// "final"): an OpQueueItem per item, and one with Result "complete" per
// queue read to the end, which the queue checker's lost-item rule needs.
func finalQueues(ctx context.Context, c *cluster, names []string) history.History {
	var queues []string
	for _, n := range names {
		if workloadOf(n) == WorkloadQueue {
			queues = append(queues, n)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	cl, err := c.sec.adminClient(c.endpoints())
	if err != nil {
		return nil
	}
	defer cl.Close()
	var h history.History
	for _, name := range queues {
		items, ok := listItems(ctx, cl, name, "queued", false)
		dead, okDead := listItems(ctx, cl, name+".dead", "dead", true)
		for i := range dead {
			dead[i].Name = name
		}
		h = append(h, items...)
		h = append(h, dead...)
		if ok && okDead {
			now := time.Now().UnixNano()
			h = append(h, history.Op{Process: history.FinalProcess, Kind: history.OpQueueItem, Name: name, Result: "complete", Outcome: history.OK, Invoke: now, Complete: now})
		}
	}
	return h
}

// listItems pages through every item of queue; dead names each by its
// origin item. ok is false when a page could not be read.
func listItems(ctx context.Context, cl *client.Client, queue, result string, dead bool) (history.History, bool) {
	q := client.NewQueue(cl, queue)
	var h history.History
	var after uint64
	for {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		st, err := q.Stats(rctx, statsPage, after)
		cancel()
		if err != nil {
			return h, false
		}
		for _, it := range st.Items {
			id := it.Item
			if dead {
				id = it.OriginItem
			}
			now := time.Now().UnixNano()
			h = append(h, history.Op{Process: history.FinalProcess, Kind: history.OpQueueItem, Name: queue, Item: id, Result: result, Outcome: history.OK, Invoke: now, Complete: now})
			after = it.Item
		}
		if len(st.Items) < statsPage {
			return h, true
		}
	}
}
