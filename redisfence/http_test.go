package redisfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence/httpfencetest"
	"github.com/fenced-dev/fenced/redisfence"
)

// TestGuard_HTTP serves Redis keys behind the httpfence middleware with a
// Guard, on a standalone server and through a ClusterClient: the handler
// queues its SET into the transaction that checks the token.
func TestGuard_HTTP(t *testing.T) {
	for _, c := range []struct {
		name string
		rdb  func(t testing.TB) redis.UniversalClient
	}{
		{"standalone", func(t testing.TB) redis.UniversalClient { return newClient(t) }},
		{"cluster", func(t testing.TB) redis.UniversalClient { return newClusterClient(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rdb := c.rdb(t)
			httpfencetest.Run(t, httpfencetest.Resource{
				Guard: redisfence.New(rdb),
				Write: func(ctx context.Context, object string, _ fence.Token, value string) error {
					pipe, ok := redisfence.PipelinerFromContext(ctx)
					if !ok {
						return errors.New("the handler's context has no pipeliner")
					}
					pipe.Set(ctx, object, value, 0)
					return nil
				},
				Read: func(ctx context.Context, object string) (string, error) {
					v, err := rdb.Get(ctx, object).Result()
					if errors.Is(err, redis.Nil) {
						return "", nil
					}
					return v, err
				},
			})
		})
	}
}
