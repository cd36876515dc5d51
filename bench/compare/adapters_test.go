package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestLockers starts each real server and checks its locker: a second
// holder waits until the first unlocks, and tokens increase per grant.
func TestLockers(t *testing.T) {
	tmp := t.TempDir()
	e := env{tmp: tmp}
	for _, name := range []string{"etcd", "zookeeper", "redis", "fenced", "pggrant", "redisgrant"} {
		t.Run(name, func(t *testing.T) {
			tg, _ := targetByName(name)
			if tg.Kind == "fenced" {
				root, err := filepath.Abs("../..")
				if err != nil {
					t.Fatal(err)
				}
				bin, err := buildFenced(root, tmp)
				if err != nil {
					t.Fatal(err)
				}
				e.fencedBin = bin
			}
			c, err := launch(e, tg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.stop()
			checkLocker(t, c)
		})
	}
}

func checkLocker(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sys, err := c.system(false, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	l1, err := sys.NewLocker(ctx, 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := sys.NewLocker(ctx, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()

	const name = "test/one"
	t1, err := l1.Lock(ctx, name)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	type grant struct {
		token uint64
		err   error
	}
	second := make(chan grant, 1)
	go func() {
		tok, err := l2.Lock(ctx, name)
		second <- grant{tok, err}
	}()
	select {
	case g := <-second:
		t.Fatalf("second holder got the lock (token %d, err %v) while the first held it", g.token, g.err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := l1.Unlock(ctx, name); err != nil {
		t.Fatalf("first unlock: %v", err)
	}
	var t2 uint64
	select {
	case g := <-second:
		if g.err != nil {
			t.Fatalf("second lock: %v", g.err)
		}
		t2 = g.token
	case <-time.After(10 * time.Second):
		t.Fatal("second holder did not get the lock within 10s of the unlock")
	}
	if t2 <= t1 {
		t.Fatalf("token of the second grant %d is not above the first %d", t2, t1)
	}
	if err := l2.Unlock(ctx, name); err != nil {
		t.Fatalf("second unlock: %v", err)
	}
	t3, err := l1.Lock(ctx, name)
	if err != nil {
		t.Fatalf("third lock: %v", err)
	}
	if t3 <= t2 {
		t.Fatalf("token of the third grant %d is not above the second %d", t3, t2)
	}
	if err := l1.Unlock(ctx, name); err != nil {
		t.Fatalf("third unlock: %v", err)
	}
	t.Logf("%s tokens %d < %d < %d", c.target.Name, t1, t2, t3)
}
