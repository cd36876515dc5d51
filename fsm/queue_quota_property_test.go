package fsm_test

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// liveClaims is an Observer that keeps the live claims of the machine's
// work queues (token -> item), whoever got them: an immediate claim or a
// waiter woken by a push.
type liveClaims struct {
	fsm.NopObserver
	m    *fsm.Machine
	live map[fence.Token]uint64
}

func (c *liveClaims) Granted(g fence.Grant) {
	if g.Kind != fence.KindClaim {
		return
	}
	ci, _ := c.m.Claim(g.Token)
	c.live[g.Token] = ci.Item
}

func (c *liveClaims) Released(k fence.Kind, _ string, _ uint64, tok fence.Token, _ int64, _ fsm.EndReason) {
	if k == fence.KindClaim {
		delete(c.live, tok)
	}
}

// TestQueue_WaitingBatchClaimQuota applies random pushes (batches of 1 to
// 8 items), batch claims (up to 8 items, waiting or not, some carrying
// acks) and acks by the sessions of one owner with a max_held and a
// max_waiting quota, and checks after every command that the owner holds
// no more claims than max_held + max_waiting: an immediate claim is cut to
// the room left under max_held, and a waiting claim that is woken by a
// push gets at most that room too, one item when the owner is at the
// limit (a waiter admitted when it queued is never refused, as a lock's).
// A woken batch claim that took up to its max_items whatever the owner
// held breaks it at once.
func TestQueue_WaitingBatchClaimQuota(t *testing.T) {
	var most int
	defer func() { t.Logf("most claims held at once: %d", most) }()
	rapid.Check(t, func(t *rapid.T) {
		c := &liveClaims{live: map[fence.Token]uint64{}}
		m := fsm.New(c)
		c.m = m
		m.Apply(initCommand(0))
		q := &statev1.Quota{Owner: "10.0.0.1", MaxSessions: 3,
			MaxHeld:    uint32(rapid.IntRange(1, 4).Draw(t, "maxHeld")),
			MaxWaiting: uint32(rapid.IntRange(1, 3).Draw(t, "maxWaiting"))}
		var sessions []uint64
		for range rapid.IntRange(1, 3).Draw(t, "sessions") {
			sessions = append(sessions, ownedSession(m, q).Session)
		}
		seq := map[uint64]uint64{}
		now := int64(1_000_000)
		for range rapid.IntRange(1, 120).Draw(t, "n") {
			now += rapid.Int64Range(0, 50).Draw(t, "dt")
			var cmd *statev1.Command
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0: // a producer's push batch
				var ps []*statev1.QueuePush
				for range rapid.IntRange(1, 8).Draw(t, "items") {
					ps = append(ps, &statev1.QueuePush{Queue: "q", Payload: []byte("x"), MaxPayloadBytes: 256 << 10, DedupeWindow: 100})
				}
				cmd = &statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueuePushBatch{QueuePushBatch: &statev1.QueuePushBatch{Pushes: ps}}}
			case 1: // a batch claim, maybe acking some of the held items
				s := rapid.SampledFrom(sessions).Draw(t, "session")
				seq[s]++
				var acks []*statev1.QueueItemToken
				for _, tok := range slices.Sorted(maps.Keys(c.live)) {
					if rapid.Bool().Draw(t, "ack") {
						acks = append(acks, &statev1.QueueItemToken{Item: c.live[tok], Token: uint64(tok)})
					}
				}
				cmd = &statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueClaim{QueueClaim: &statev1.QueueClaim{
					Session: s, Seq: seq[s], Queue: "q", VisibilityMs: 60_000, Wait: rapid.Bool().Draw(t, "wait"),
					MaxItems: uint32(rapid.IntRange(1, 8).Draw(t, "maxItems")), Acks: acks, Quota: q}}}
			default: // an ack of one held item
				if len(c.live) == 0 {
					continue
				}
				tok := rapid.SampledFrom(slices.Sorted(maps.Keys(c.live))).Draw(t, "acked")
				cmd = &statev1.Command{NowUnixMs: now, Op: &statev1.Command_QueueAck{QueueAck: &statev1.QueueAck{Queue: "q", Item: c.live[tok], Token: uint64(tok)}}}
			}
			m.Apply(cmd)
			_, held, waiting := m.Usage(q.GetOwner())
			most = max(most, held)
			if held != len(c.live) {
				t.Fatalf("the owner is charged %d holds; %d claims are live", held, len(c.live))
			}
			if held > int(q.GetMaxHeld()+q.GetMaxWaiting()) {
				t.Fatalf("after %v the owner holds %d claims (%d waiting); max_held %d + max_waiting %d", cmd, held, waiting, q.GetMaxHeld(), q.GetMaxWaiting())
			}
		}
	})
}
