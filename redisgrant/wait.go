package redisgrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitFor runs try until it grants, fails, or ctx ends. After a first
// refused try it subscribes to channel, on which every release of the
// object is published, and tries again, so no release between a try and
// the wait is missed. After a refused try it sleeps until a message
// arrives, until retry (the holder's remaining TTL on Redis's clock,
// reported by try, plus 1ms) has passed, or for the grantor's recheck
// interval, whichever comes first. The
// recheck only covers a lost message: Redis pub/sub delivers at most once.
//
// The Grantor's own waiters for the object queue first come, first served
// (internal/turns): only the head of the queue subscribes and asks Redis,
// so a release wakes one script per process, not one per waiter.
func waitFor[T any](ctx context.Context, g *Grantor, op, name, channel string, try func() (*T, time.Duration, error)) (*T, error) {
	head, leave := g.turns.Join(channel)
	defer leave()
	select {
	case <-head:
	case <-ctx.Done():
		return nil, fmt.Errorf("redisgrant: %s %q: %w", op, name, ctx.Err())
	}
	// A free object costs one script and no subscription.
	if x, _, err := try(); err != nil || x != nil {
		return x, err
	}
	sub := g.rdb.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redisgrant: %s %q: %w", op, name, ctx.Err())
		}
		return nil, fmt.Errorf("redisgrant: %s %q: subscribe to %s: %w", op, name, channel, err)
	}
	msgs := sub.Channel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		x, retry, err := try()
		if err != nil || x != nil {
			return x, err
		}
		d := g.recheck
		if retry > 0 && retry+time.Millisecond < d {
			d = retry + time.Millisecond
		}
		timer.Reset(d)
		select {
		case <-msgs:
		case <-timer.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("redisgrant: %s %q: %w", op, name, ctx.Err())
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// unknownOutcome reports whether err leaves a script's outcome unknown:
// anything but a reply from Redis (a network error, a timeout, a
// cancelled context) may come after Redis ran the script.
func unknownOutcome(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr)
}
