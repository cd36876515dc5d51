package testdb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fenced-dev/fenced/internal/testdb"
)

func TestStartPostgres(t *testing.T) {
	pg, err := testdb.StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d %v", one, err)
	}
}

func TestStartRedis(t *testing.T) {
	r, err := testdb.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	if err := rc.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestStartRedisCluster(t *testing.T) {
	r, err := testdb.StartRedisCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{r.Addr}})
	defer rdb.Close()
	if err := rdb.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.MSet(ctx, "a", "1", "b", "2").Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET of two slots=%v, want CROSSSLOT: the cluster checks slots", err)
	}
}
