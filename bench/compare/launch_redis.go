package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/redisgrant"
)

// redisBin is where Debian's redis-server package puts the server.
const redisBin = "/usr/bin/redis-server"

// startRedis starts one Redis with the append-only file fsynced before
// every reply (appendfsync always): durable on this node, not replicated.
// RDB snapshots are off (save "") so no background fork lands inside a
// measurement; the AOF is the durability.
func (c *cluster) startRedis() error {
	bin, err := lookBin(redisBin)
	if err != nil {
		return err
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	p, err := startProcess(c.dir, "redis", bin,
		"--bind", "127.0.0.1",
		"--port", port,
		"--dir", c.dir,
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "",
		"--daemonize", "no",
		"--logfile", "",
	)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.endpoints = addrs
	return p.waitFor(30*time.Second, func() error { return redisPing(addrs[0]) })
}

// redisPing sends PING in the inline protocol and wants +PONG.
func redisPing(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %s", strconv.Quote(line))
	}
	return nil
}

// redisGrantor returns the bench.System of a redisgrant Grantor on the
// Redis at addr, with one go-redis client shared by every locker and a
// pool sized like the redis target's (RedisPoolSize). It runs the
// grantor's Check (Lua, eviction policy) before any workload.
func redisGrantor(addr string) (bench.System, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     RedisPoolSize,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
	})
	g := redisgrant.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Check(ctx); err != nil {
		rdb.Close()
		return nil, err
	}
	return bench.NewGrantor("redisgrant", g, rdb), nil
}
