package redisfence_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/internal/testdb"
)

var (
	// redisAddr is a throwaway standalone redis-server.
	redisAddr string
	// clusterAddr is a throwaway redis-server in cluster mode, one node
	// owning all 16384 slots: it routes and checks hash slots (CROSSSLOT)
	// as a real cluster does.
	clusterAddr string
)

func TestMain(m *testing.M) {
	r, err := testdb.StartRedis()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	redisAddr = r.Addr
	c, err := startClusterRedis()
	if err != nil {
		r.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clusterAddr = c.addr
	code := m.Run()
	c.stop()
	r.Stop()
	os.Exit(code)
}

// clusterRedis is a single-node Redis Cluster.
type clusterRedis struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

// startClusterRedis starts redis-server with cluster mode on, on a free
// loopback port, and assigns it every slot.
func startClusterRedis() (*clusterRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not installed; run scripts/test.sh or: apt-get install -y redis-server")
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		dir, err := os.MkdirTemp("", "fenced-redis-cluster-")
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		c := &clusterRedis{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		c.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-announce-ip", "127.0.0.1")
		c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
		if err := c.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server in cluster mode: %w", err)
		}
		if lastErr = c.init(); lastErr == nil {
			return c, nil
		}
		lastErr = fmt.Errorf("%v\nserver log:\n%s", lastErr, c.log.String())
		c.stop()
	}
	return nil, fmt.Errorf("redis-server in cluster mode did not start: %w", lastErr)
}

// init assigns every slot to the node and waits for cluster_state:ok.
func (c *clusterRedis) init() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: c.addr, MaxRetries: -1})
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

func (c *clusterRedis) stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
	os.RemoveAll(c.dir)
}

// newClient returns a client of the standalone server, closed when t ends.
func newClient(t testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// exampleClient returns a client of an empty database (database 1 of the
// standalone server, flushed), so that examples print the same output
// however often they run.
func exampleClient() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, DB: 1})
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		panic(err)
	}
	return rdb
}

// newClusterClient returns a cluster client of the cluster-mode server,
// closed when t ends.
func newClusterClient(t testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{clusterAddr}})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// ctx returns a context that ends with t.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// uniqueKey returns a key no other test uses.
func uniqueKey(t testing.TB, prefix string) string {
	return fmt.Sprintf("%s%s-%d", prefix, strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}
