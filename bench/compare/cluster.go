package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// target is one system under test in one shape: a kind of server and how
// many nodes form it.
type target struct {
	// Name is how results name it: the kind, with "-N" for N > 1 nodes.
	Name string
	// Kind is fenced, etcd, zookeeper, redis, pggrant (the PostgreSQL
	// grantor on a PostgreSQL server) or redisgrant (the Redis grantor on
	// a Redis server started like redis's).
	Kind string
	// Nodes is the cluster size.
	Nodes int
}

// targets lists every target the matrix knows, in report order.
var targets = []target{
	{"fenced", "fenced", 1},
	{"etcd", "etcd", 1},
	{"zookeeper", "zookeeper", 1},
	{"redis", "redis", 1},
	{"pggrant", "pggrant", 1},
	{"redisgrant", "redisgrant", 1},
	{"fenced-3", "fenced", 3},
	{"etcd-3", "etcd", 3},
	// fenced-batch is fenced on one node, measured with the case's
	// limiter batch (benchCase.Batch).
	{"fenced-batch", "fenced", 1},
}

// targetByName returns the target called name.
func targetByName(name string) (target, bool) {
	for _, t := range targets {
		if t.Name == name {
			return t, true
		}
	}
	return target{}, false
}

// cluster is a running target: its server processes, on loopback ports,
// with data in a fresh temporary directory.
type cluster struct {
	target    target
	dir       string
	endpoints []string // client addresses, host:port
	procs     []*process
}

// env is what launching needs from the runner.
type env struct {
	// fencedBin is the fenced binary built for this invocation.
	fencedBin string
	// tmp is the directory under which each cluster gets its own.
	tmp string
}

// launch starts t fresh and waits until it serves.
func launch(e env, t target) (*cluster, error) {
	dir, err := os.MkdirTemp(e.tmp, t.Name+"-")
	if err != nil {
		return nil, err
	}
	c := &cluster{target: t, dir: dir}
	switch t.Kind {
	case "fenced":
		err = c.startFenced(e.fencedBin)
	case "etcd":
		err = c.startEtcd()
	case "zookeeper":
		err = c.startZooKeeper()
	case "redis", "redisgrant":
		err = c.startRedis()
	case "pggrant":
		err = c.startPostgres()
	default:
		err = fmt.Errorf("unknown kind %q", t.Kind)
	}
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("start %s: %w", t.Name, err)
	}
	return c, nil
}

// pids returns the server processes' ids.
func (c *cluster) pids() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// stop stops every process (in parallel, bounded) and removes the data.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(func() { p.stop(5 * time.Second) })
	}
	wg.Wait()
	_ = os.RemoveAll(c.dir)
}

// system returns the bench.System that drives c the way its kind's
// documentation recommends: with one client shared by every locker, or,
// when perLocker, a client per locker (clients of them) for fenced and
// etcd. ZooKeeper and Redis give every locker a connection of its own
// either way.
func (c *cluster) system(perLocker bool, clients int) (bench.System, error) {
	switch c.target.Kind {
	case "fenced":
		if perLocker {
			return bench.NewFenced(c.endpoints, clients)
		}
		return bench.NewFenced(c.endpoints, 1)
	case "etcd":
		return NewEtcd(c.endpoints, perLocker)
	case "zookeeper":
		return NewZooKeeper(c.endpoints)
	case "redis":
		return NewRedis(c.endpoints[0])
	case "pggrant":
		return pgGrantor(c.endpoints[0])
	case "redisgrant":
		return redisGrantor(c.endpoints[0])
	}
	return nil, fmt.Errorf("unknown kind %q", c.target.Kind)
}
