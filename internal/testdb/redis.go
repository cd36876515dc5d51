package testdb

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a throwaway redis-server.
type Redis struct {
	// Addr is the server's host:port on loopback.
	Addr  string
	dir   string
	bin   string
	extra []string
	cmd   *exec.Cmd
}

// StartRedis starts redis-server on a free loopback port with a temporary
// directory and append-only persistence off. Call Stop when done.
func StartRedis() (*Redis, error) {
	return StartRedisArgs("--save", "", "--appendonly", "no")
}

// StartRedisArgs starts redis-server like StartRedis with extra command
// line arguments instead of StartRedis's persistence settings (for example
// "--appendonly", "yes", "--appendfsync", "always"). The server can be
// killed and started again on the same port and directory (Kill, Restart).
// Call Stop when done.
func StartRedisArgs(extra ...string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("testdb: redis-server not installed; run scripts/test.sh or: apt-get install -y redis-server")
	}
	dir, err := os.MkdirTemp("", "fenced-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			break
		}
		r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, bin: bin, extra: extra}
		if err := r.start(); err == nil {
			return r, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("testdb: redis-server did not start on a free port")
}

// start runs the server on r's port and directory and waits for its port.
func (r *Redis) start() error {
	_, port, _ := net.SplitHostPort(r.Addr)
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", r.dir, "--protected-mode", "yes"}, r.extra...)
	r.cmd = exec.Command(r.bin, args...)
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("testdb: start redis-server: %w", err)
	}
	if err := waitPort(r.Addr, 10*time.Second); err != nil {
		r.Kill()
		return fmt.Errorf("testdb: redis-server did not listen on %s: %w", r.Addr, err)
	}
	return nil
}

// Kill sends the server SIGKILL and waits for it to exit, keeping its
// directory (its RDB and AOF files) for Restart.
func (r *Redis) Kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	r.cmd = nil
}

// Restart starts the server again on the same port, directory and
// arguments, after Kill.
func (r *Redis) Restart() error {
	r.Kill()
	return r.start()
}

// Stop kills the server and removes its directory.
func (r *Redis) Stop() {
	r.Kill()
	os.RemoveAll(r.dir)
}

// StartRedisCluster starts redis-server in cluster mode as a one-node
// Redis Cluster that owns all 16384 slots: it routes and checks hash slots
// (CROSSSLOT) as a real cluster does. Call Stop when done.
func StartRedisCluster() (*Redis, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		// nodes.conf is relative to the server's --dir.
		r, err := StartRedisArgs("--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-announce-ip", "127.0.0.1")
		if err != nil {
			return nil, err
		}
		if lastErr = assignAllSlots(r.Addr); lastErr == nil {
			return r, nil
		}
		r.Stop()
	}
	return nil, fmt.Errorf("testdb: redis-server in cluster mode did not start: %w", lastErr)
}

// assignAllSlots gives the node at addr every slot and waits for
// cluster_state:ok.
func assignAllSlots(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for {
		err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err()
		if err == nil || strings.Contains(err.Error(), "already busy") {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		info, err := rdb.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster_state not ok: %v %s", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
