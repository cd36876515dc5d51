package check

import (
	"context"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

// finalSigningKeys reads the cluster's published signing keys once every
// fault is healed (process "final"), for the signed-grant checker: one
// OpSigningKeys with the key set's document, or nothing when they cannot
// be read (the checker then checks only that each signed grant is for
// its own token and scope).
func finalSigningKeys(ctx context.Context, c *cluster) history.History {
	cl, err := c.sec.adminClient(c.endpoints())
	if err != nil {
		return nil
	}
	defer cl.Close()
	op := history.Op{Process: history.FinalProcess, Kind: history.OpSigningKeys, Invoke: time.Now().UnixNano()}
	kctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ks, err := cl.SigningKeys(kctx)
	cancel()
	if err != nil {
		return nil
	}
	doc, err := ks.MarshalJSON()
	if err != nil {
		return nil
	}
	op.Outcome, op.Value, op.Complete = history.OK, string(doc), time.Now().UnixNano()
	return history.History{op}
}
