package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/bench"
)

// Redis has no work queue with claims; this is the reliable-queue pattern
// of the Redis documentation (LPUSH; LMOVE/BLMOVE from the queue's list to
// a processing list; LREM from the processing list on ack) plus what it
// takes to give a claim a fencing token: the claim takes the next value of
// the same global INCR counter as the locks' and records it in a hash of
// claims, and the ack removes the item only while that hash still holds
// its token (a stale ack changes nothing). The claim is one Lua script
// (LMOVE + INCR + HSET, atomic) when an item is there, and BLMOVE, then
// the token script, when the queue is empty, so the worker waits without
// polling. Each push, claim and ack is one round trip, fsynced with
// appendfsync always.
//
// What the pattern lacks against fenced's queue: there is no visibility
// timeout and no redelivery — an item whose worker died stays in the
// processing list until a reaper the user writes (with claim times kept
// somewhere) moves it back, and nothing checks that only one reaper runs;
// no dead-letter queue, no dedupe key, no claims tied to a session; and
// one unreplicated node, whose asynchronous replicas can lose acked pushes
// and roll the token counter back on failover.
var (
	// KEYS: q:<name>, q:<name>:processing, fence, q:<name>:claims.
	redisQueueClaim = redis.NewScript(`
local v = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
if not v then return false end
local t = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[4], v, t)
return {v, t}`)
	// KEYS: fence, q:<name>:claims. ARGV: the item BLMOVE moved.
	redisQueueToken = redis.NewScript(`
local t = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], t)
return t`)
	// KEYS: q:<name>:processing, q:<name>:claims. ARGV: item, token.
	redisQueueAck = redis.NewScript(`
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('LREM', KEYS[1], 1, ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)
)

// errRedisStaleClaim is returned by Ack when the item's claim token is no
// longer the one acked.
var errRedisStaleClaim = errors.New("redis: the claim token is not the item's current claim")

var _ bench.Queuer = (*redisLocker)(nil)

func redisQueueKeys(queue string) (list, processing, claims string) {
	return "q:" + queue, "q:" + queue + ":processing", "q:" + queue + ":claims"
}

// Push implements bench.Queuer: the item is a unique id and the payload,
// one list element.
func (l *redisLocker) Push(ctx context.Context, queue string, payload []byte) error {
	list, _, _ := redisQueueKeys(queue)
	item := fmt.Sprintf("%s-%d:%s", l.owner, l.n.Add(1), payload)
	if err := l.r.rdb.LPush(ctx, list, item).Err(); err != nil {
		return fmt.Errorf("redis lpush %s: %w", list, err)
	}
	return nil
}

// Claim implements bench.Queuer. The item is the list element.
func (l *redisLocker) Claim(ctx context.Context, queue string, _ time.Duration) (string, uint64, error) {
	list, processing, claims := redisQueueKeys(queue)
	for {
		v, err := redisQueueClaim.Run(ctx, l.r.rdb, []string{list, processing, redisFenceKey, claims}).Slice()
		switch {
		case err == nil && len(v) == 2:
			item, _ := v[0].(string)
			token, _ := v[1].(int64)
			return item, uint64(token), nil
		case err != nil && !errors.Is(err, redis.Nil):
			return "", 0, fmt.Errorf("redis claim %s: %w", list, err)
		}
		item, err := l.r.rdb.BLMove(ctx, list, processing, "RIGHT", "LEFT", time.Second).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return "", 0, fmt.Errorf("redis blmove %s: %w", list, err)
		}
		token, err := redisQueueToken.Run(ctx, l.r.rdb, []string{redisFenceKey, claims}, item).Int64()
		if err != nil {
			return "", 0, fmt.Errorf("redis claim token %s: %w", list, err)
		}
		return item, uint64(token), nil
	}
}

// Ack implements bench.Queuer.
func (l *redisLocker) Ack(ctx context.Context, queue, item string, token uint64) error {
	_, processing, claims := redisQueueKeys(queue)
	n, err := redisQueueAck.Run(ctx, l.r.rdb, []string{processing, claims}, item, strconv.FormatUint(token, 10)).Int64()
	if err != nil {
		return fmt.Errorf("redis ack %s: %w", processing, err)
	}
	if n == 0 {
		return errRedisStaleClaim
	}
	return nil
}

// Batches (the queue-64-batch case), the nearest Redis has to fenced's:
// a push of N items is one LPUSH with N values; a claim of up to N is one
// Lua script that LMOVEs up to N items to the processing list, each with
// its own INCR token (BLMOVE of one, then the token script, when the
// queue is empty, as Claim does); an ack of N is one Lua script doing the
// token-checked LREM of each. Each is one round trip, fsynced with
// appendfsync always.
var (
	// KEYS: q:<name>, q:<name>:processing, fence, q:<name>:claims. ARGV:
	// the most items to move.
	redisQueueClaimBatch = redis.NewScript(`
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local v = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not v then break end
  local t = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[4], v, t)
  out[#out+1] = v
  out[#out+1] = t
end
return out`)
	// KEYS: q:<name>:processing, q:<name>:claims. ARGV: item, token, item,
	// token, ... Returns 1 (acked) or 0 (stale) for each.
	redisQueueAckBatch = redis.NewScript(`
local out = {}
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i+1] then
    redis.call('LREM', KEYS[1], 1, ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    out[#out+1] = 1
  else
    out[#out+1] = 0
  end
end
return out`)
)

var _ bench.BatchQueuer = (*redisLocker)(nil)

// PushBatch implements bench.BatchQueuer: one LPUSH of every item.
func (l *redisLocker) PushBatch(ctx context.Context, queue string, payloads [][]byte) error {
	list, _, _ := redisQueueKeys(queue)
	items := make([]any, len(payloads))
	for i, p := range payloads {
		items[i] = fmt.Sprintf("%s-%d:%s", l.owner, l.n.Add(1), p)
	}
	if err := l.r.rdb.LPush(ctx, list, items...).Err(); err != nil {
		return fmt.Errorf("redis lpush %s: %w", list, err)
	}
	return nil
}

// ClaimBatch implements bench.BatchQueuer: the ack script for acks, then
// the claim script (or BLMOVE and the token script when the queue is
// empty).
func (l *redisLocker) ClaimBatch(ctx context.Context, queue string, most int, visibility time.Duration, acks []bench.ItemToken) ([]bench.ItemToken, []error, error) {
	list, processing, claims := redisQueueKeys(queue)
	var ackErrs []error
	if len(acks) > 0 {
		args := make([]any, 0, 2*len(acks))
		for _, a := range acks {
			args = append(args, a.Item, strconv.FormatUint(a.Token, 10))
		}
		res, err := redisQueueAckBatch.Run(ctx, l.r.rdb, []string{processing, claims}, args...).Int64Slice()
		if err == nil && len(res) != len(acks) {
			err = fmt.Errorf("the ack script answered %d of %d", len(res), len(acks))
		}
		ackErrs = make([]error, len(acks))
		for i := range acks {
			switch {
			case err != nil:
				ackErrs[i] = fmt.Errorf("redis ack batch %s: %w", processing, err)
			case res[i] == 0:
				ackErrs[i] = errRedisStaleClaim
			}
		}
	}
	v, err := redisQueueClaimBatch.Run(ctx, l.r.rdb, []string{list, processing, redisFenceKey, claims}, most).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, ackErrs, fmt.Errorf("redis claim batch %s: %w", list, err)
	}
	var out []bench.ItemToken
	for i := 0; i+1 < len(v); i += 2 {
		item, _ := v[i].(string)
		token, _ := v[i+1].(int64)
		out = append(out, bench.ItemToken{Item: item, Token: uint64(token)})
	}
	if len(out) > 0 {
		return out, ackErrs, nil
	}
	item, token, err := l.Claim(ctx, queue, visibility)
	if err != nil {
		return nil, ackErrs, err
	}
	return []bench.ItemToken{{Item: item, Token: token}}, ackErrs, nil
}
