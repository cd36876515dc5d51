package main

import (
	"context"
	"strings"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/pggrant"
	"github.com/fenced-dev/fenced/redisgrant"
	"github.com/redis/go-redis/v9"
)

// benchBackend returns the bench System of the library grantor that
// --backend names, a postgres:// (or postgresql://) DSN for pggrant or a
// redis:// (rediss://) URL for redisgrant,
// after checking that it runs workload w. It reports ok false for "" and
// "fenced": the server at --endpoints.
func benchBackend(ctx context.Context, backend string, w bench.Workload) (sys bench.System, ok bool, err error) {
	var open func() (bench.System, error)
	switch {
	case backend == "" || backend == "fenced":
		return nil, false, nil
	case strings.HasPrefix(backend, "postgres://"), strings.HasPrefix(backend, "postgresql://"):
		open = func() (bench.System, error) {
			g, err := pggrant.Open(ctx, backend)
			if err != nil {
				return nil, err
			}
			return bench.NewGrantor("postgres", g, g), nil
		}
	case strings.HasPrefix(backend, "redis://"), strings.HasPrefix(backend, "rediss://"):
		open = func() (bench.System, error) {
			o, err := redis.ParseURL(backend)
			if err != nil {
				return nil, err
			}
			rdb := redis.NewClient(o)
			g := redisgrant.New(rdb)
			if err := g.Check(ctx); err != nil {
				rdb.Close()
				return nil, err
			}
			return bench.NewGrantor("redis", g, rdb), nil
		}
	default:
		return nil, true, usageError("--backend %q: want fenced (the server at --endpoints), a postgres:// DSN or a redis:// URL", backend)
	}
	// A library grantor has locks, not sessions, semaphores or the kv.
	if w != bench.WorkloadLock && w != bench.WorkloadHandoff {
		return nil, true, usageError("--workload %s needs the fenced server; a --backend grantor runs lock and handoff", w)
	}
	sys, err = open()
	return sys, true, err
}
