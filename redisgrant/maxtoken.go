package redisgrant

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
)

// MaxToken returns the highest token any counter of the grantor's prefix
// holds (locks' and semaphores'), 0 when there is none: the floor for a
// move to the fenced server (fenced serve --token-floor N, with N at
// least MaxToken), so that every token the server issues is above every
// token Redis issued. It SCANs the keys (every master of a cluster) and
// writes nothing. A grant made while it runs may be above its answer:
// stop granting from Redis first. With WithKeys it fails with an error
// wrapping fence.ErrInvalidArgument: it knows only its own layout.
func (g *Grantor) MaxToken(ctx context.Context) (fence.Token, error) {
	if g.keyOf != nil {
		return 0, fmt.Errorf("redisgrant: max token: %w: the key layout of WithKeys is unknown to the grantor; read your counters' \"token\" fields", fence.ErrInvalidArgument)
	}
	if err := g.Check(ctx); err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var high fence.Token
	scan := func(ctx context.Context, c *redis.Client) error {
		for _, pattern := range []string{g.prefix + "{*}:counter", g.prefix + "{*}:sem-counter"} {
			it := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for it.Next(ctx) {
				key := it.Val()
				if !strings.HasPrefix(key, g.prefix+"{") {
					continue
				}
				s, err := c.HGet(ctx, key, "token").Result()
				if err == redis.Nil {
					continue
				}
				if err != nil {
					return fmt.Errorf("read %s: %w", key, err)
				}
				t, err := fence.ParseToken(s)
				if err != nil {
					return fmt.Errorf("%w: %s holds token %q", ErrCorrupt, key, s)
				}
				mu.Lock()
				high = max(high, t)
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := g.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("%w: a %T; MaxToken needs a *redis.Client, *redis.ClusterClient or *redis.Ring", fence.ErrInvalidArgument, g.rdb)
	}
	if err != nil {
		return 0, fmt.Errorf("redisgrant: max token: %w", err)
	}
	return high, nil
}
