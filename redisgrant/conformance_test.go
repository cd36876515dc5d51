package redisgrant_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/grantortest"
	"github.com/fenced-dev/fenced/redisgrant"
)

// The Redis grantor passes the grantor conformance suite on a real
// redis-server with appendfsync always, killed with SIGKILL and started
// again on its data in the middle.
func TestGrantor_Conformance(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	const recheck = 30 * time.Second
	grantortest.Run(t, grantortest.Store{
		Addr: r.Addr,
		Open: func(t *testing.T, addr string) fence.Grantor {
			rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
			t.Cleanup(func() { rdb.Close() })
			return redisgrant.New(rdb, redisgrant.WithRecheck(recheck))
		},
		Restart: func(t *testing.T) {
			if err := r.Restart(); err != nil { // Restart kills with SIGKILL first
				t.Fatal(err)
			}
		},
		Recheck: recheck,
	})
}
