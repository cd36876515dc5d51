package redisfence_test

import (
	"context"
	"fmt"
	"os"
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
	c, err := testdb.StartRedisCluster()
	if err != nil {
		r.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clusterAddr = c.Addr
	code := m.Run()
	c.Stop()
	r.Stop()
	os.Exit(code)
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
