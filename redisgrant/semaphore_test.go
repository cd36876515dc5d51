package redisgrant_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/redisgrant"
)

func TestSemaphore_CapacitySlotsAndTokens(t *testing.T) {
	g := redisgrant.New(newClient(t))
	name := uniqueName(t)
	const capacity, workers, rounds = 3, 6, 10
	var mu sync.Mutex
	inUse := map[int]bool{}
	prev := map[int]fence.Token{} // by slot: a slot's holders come one at a time
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := g.NewSemaphore(name, capacity, time.Minute)
			for r := 0; r < rounds; r++ {
				k := 1 + r%2
				p, err := sem.Acquire(ctx(t), k)
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for _, x := range p.List() {
					var err error
					switch {
					case x.Slot < 0 || x.Slot >= capacity:
						err = fmt.Errorf("slot %d outside 0..%d", x.Slot, capacity-1)
					case inUse[x.Slot]:
						err = fmt.Errorf("slot %d granted twice at once", x.Slot)
					case x.Token <= prev[x.Slot]:
						err = fmt.Errorf("slot %d: permit token %d after %d", x.Slot, x.Token, prev[x.Slot])
					case x.Scope() != fmt.Sprintf("%s/%d", name, x.Slot) || x.Grant.Kind != fence.KindPermit:
						err = fmt.Errorf("permit grant %+v", x.Grant)
					}
					if err != nil {
						fail(err)
					}
					inUse[x.Slot] = true
					prev[x.Slot] = x.Token
				}
				if len(inUse) > capacity {
					fail(fmt.Errorf("%d permits live, capacity %d", len(inUse), capacity))
				}
				mu.Unlock()
				mu.Lock()
				for _, x := range p.List() {
					delete(inUse, x.Slot)
				}
				mu.Unlock()
				if res, err := p.Release(ctx(t)); err != nil || res != fence.Released {
					fail(fmt.Errorf("release=%v, %v", res, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSemaphore_WaitWokenByReleaseAndExpiry(t *testing.T) {
	rdb := newClient(t)
	g := redisgrant.New(rdb, redisgrant.WithRecheck(time.Hour))
	name := uniqueName(t)
	sem := g.NewSemaphore(name, 2, time.Minute)
	all, err := sem.TryAcquire(ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx(t), 1); !errors.Is(err, fence.ErrNotGranted) {
		t.Fatalf("TryAcquire of a full semaphore=%v, want fence.ErrNotGranted", err)
	}
	got := make(chan *redisgrant.Permits, 1)
	go func() {
		p, err := sem.Acquire(ctx(t), 1)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if res, err := all.Release(ctx(t)); err != nil || res != fence.Released {
		t.Fatalf("Release=%v, %v", res, err)
	}
	p := <-got
	if p == nil {
		return
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("waiter took %v after the release with a recheck of 1h", d)
	}
	if p.List()[0].Token <= all.List()[1].Token {
		t.Fatalf("waiter's token %d not above %d", p.List()[0].Token, all.List()[1].Token)
	}
	p.Release(ctx(t))

	// A holder that stops renewing (its client closed) loses its permits
	// when their deadline passes on Redis's clock; a waiter is woken then.
	dead := redis.NewClient(&redis.Options{Addr: redisAddr})
	gone, err := redisgrant.New(dead).NewSemaphore(name, 2, 500*time.Millisecond).TryAcquire(ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	start := time.Now()
	p, err = sem.Acquire(ctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("waiter took %v for permits with a TTL of 500ms", d)
	}
	if p.List()[0].Token <= gone.List()[1].Token {
		t.Fatalf("token %d not above the expired permits' %d", p.List()[0].Token, gone.List()[1].Token)
	}
	if res, err := gone.Release(ctx(t)); err == nil && res != fence.NotOwned {
		t.Fatalf("Release of expired permits whose slots are held again=%v, want not owned", res)
	}
	p.Release(ctx(t))
}

func TestSemaphore_BadInputWritesNothing(t *testing.T) {
	r := startRedis(t, "--save", "", "--appendonly", "no")
	rdb := clientOf(t, r.Addr)
	g := redisgrant.New(rdb)
	for _, c := range []struct {
		capacity, k int
		ttl         time.Duration
	}{
		{0, 1, time.Minute}, {-1, 1, time.Minute}, {redisgrant.MaxCapacity + 1, 1, time.Minute},
		{3, 0, time.Minute}, {3, 4, time.Minute}, {3, 1, time.Millisecond}, {3, 1, 25 * time.Hour},
	} {
		_, err := g.NewSemaphore("pool", c.capacity, c.ttl).TryAcquire(ctx(t), c.k)
		wantIs(t, fmt.Sprintf("TryAcquire(capacity %d, k %d, ttl %v)", c.capacity, c.k, c.ttl), err, fence.ErrInvalidArgument)
	}
	wantNothingWritten(t, rdb)

	p, err := g.NewSemaphore("pool", 3, time.Minute).TryAcquire(ctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := rdb.HGetAll(ctx(t), "fenced:{pool}:sem").Result()
	_, err = g.NewSemaphore("pool", 4, time.Minute).TryAcquire(ctx(t), 1)
	wantIs(t, "TryAcquire with another capacity while a permit is live", err, fence.ErrCapacityMismatch)
	after, _ := rdb.HGetAll(ctx(t), "fenced:{pool}:sem").Result()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("a refused acquire changed the semaphore: %v -> %v", before, after)
	}
	p.Release(ctx(t))
	// With no permit live, the capacity may change.
	q, err := g.NewSemaphore("pool", 4, time.Minute).TryAcquire(ctx(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	q.Release(ctx(t))
}
