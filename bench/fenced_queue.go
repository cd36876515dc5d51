package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/fenced-dev/fenced/client"
)

var _ Queuer = (*fencedLocker)(nil)

func (l *fencedLocker) queue(name string) *client.Queue {
	return cached(&l.mu, l.queues, name, func() *client.Queue { return client.NewQueue(l.c, name) })
}

// Push implements Queuer.
func (l *fencedLocker) Push(ctx context.Context, queue string, payload []byte) error {
	_, _, err := l.queue(queue).Push(ctx, payload)
	return err
}

// Claim implements Queuer: a waiting claim held by the locker's session,
// pushed by the server when an item is available; the SDK extends it
// until Ack.
func (l *fencedLocker) Claim(ctx context.Context, queue string, visibility time.Duration) (string, uint64, error) {
	cl, err := l.queue(queue).Claim(ctx, l.s, visibility)
	if err != nil {
		return "", 0, err
	}
	return l.keep(queue, cl), uint64(cl.Token), nil
}

// Ack implements Queuer.
func (l *fencedLocker) Ack(ctx context.Context, queue, item string, token uint64) error {
	cl, err := l.held(queue, item, token)
	if err != nil {
		return err
	}
	return cl.Ack(ctx)
}

var _ AckClaimer = (*fencedLocker)(nil)

// AckAndClaimNext implements AckClaimer with Claim.AckAndClaimNext.
func (l *fencedLocker) AckAndClaimNext(ctx context.Context, queue, item string, token uint64) (string, uint64, error, error) {
	cl, err := l.held(queue, item, token)
	if err != nil {
		return "", 0, err, err
	}
	next, ackErr, err := cl.AckAndClaimNext(ctx)
	if err != nil {
		return "", 0, ackErr, err
	}
	return l.keep(queue, next), uint64(next.Token), ackErr, nil
}

var _ BatchQueuer = (*fencedLocker)(nil)

// PushBatch implements BatchQueuer with client.Queue.PushBatch.
func (l *fencedLocker) PushBatch(ctx context.Context, queue string, payloads [][]byte) error {
	items := make([]client.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = client.PushItem{Payload: p}
	}
	_, err := l.queue(queue).PushBatch(ctx, items)
	return err
}

// ClaimBatch implements BatchQueuer with
// client.Queue.AckAndClaimNextBatch (ClaimBatch without acks).
func (l *fencedLocker) ClaimBatch(ctx context.Context, queue string, most int, visibility time.Duration, acks []ItemToken) ([]ItemToken, []error, error) {
	done := make([]*client.Claim, len(acks))
	for i, a := range acks {
		cl, err := l.held(queue, a.Item, a.Token)
		if err != nil {
			return nil, []error{err}, err
		}
		done[i] = cl
	}
	var (
		next    []*client.Claim
		ackErrs []error
		err     error
	)
	if len(done) == 0 {
		next, err = l.queue(queue).ClaimBatch(ctx, l.s, visibility, most)
	} else {
		next, ackErrs, err = l.queue(queue).AckAndClaimNextBatch(ctx, l.s, visibility, most, done)
	}
	if err != nil {
		return nil, ackErrs, err
	}
	out := make([]ItemToken, len(next))
	for i, cl := range next {
		out[i] = ItemToken{Item: l.keep(queue, cl), Token: uint64(cl.Token)}
	}
	return out, ackErrs, nil
}

// held takes the claim of item with token out of the locker's claims.
func (l *fencedLocker) held(queue, item string, token uint64) (*client.Claim, error) {
	key := queue + "/" + item
	l.mu.Lock()
	cl := l.claims[key]
	delete(l.claims, key)
	l.mu.Unlock()
	if cl == nil || uint64(cl.Token) != token {
		return nil, fmt.Errorf("bench: no claim of %s with token %d held", key, token)
	}
	return cl, nil
}

// keep files cl among the locker's claims and returns its item id.
func (l *fencedLocker) keep(queue string, cl *client.Claim) string {
	item := strconv.FormatUint(cl.Item, 10)
	l.mu.Lock()
	l.claims[queue+"/"+item] = cl
	l.mu.Unlock()
	return item
}

var _ LimiterSystem = (*Fenced)(nil)

// NewLimiters implements LimiterSystem: the limiter is configured once,
// and each handle is the SDK's client.Limiter on one of the connections,
// batching with client.WithBatch (maximum age 1s) when batch is above 1.
func (f *Fenced) NewLimiters(ctx context.Context, name string, capacity, ratePerS uint64, n, batch int) ([]Limiter, error) {
	spec := client.LimiterSpec{Algorithm: client.TokenBucket, Limit: capacity, Rate: ratePerS, Window: time.Second}
	if _, err := f.clients[0].LimiterConfig(ctx, name, spec, false); err != nil {
		return nil, fmt.Errorf("configure limiter %s: %w", name, err)
	}
	var opts []client.LimiterOption
	if batch > 1 {
		opts = append(opts, client.WithBatch(uint64(batch), time.Second))
	}
	out := make([]Limiter, n)
	for i := range out {
		out[i] = f.clients[i%len(f.clients)].Limiter(name, opts...)
	}
	return out, nil
}
