package redisgrant

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
)

// Rate limiters: a fixed window, a sliding window and a token bucket,
// each one Lua script that reads Redis's clock (TIME, in microseconds) and
// decides and books in one step, so every client of one Redis shares one
// limit without trusting its own clock. The API follows
// golang.org/x/time/rate and the server's client.Limiter: Allow, Reserve
// and Wait, each with an N form (n a uint64, as client.Limiter's). Unlike
// client.Limiter's ReserveN, which takes permits only when they are free
// now, Reserve here books the event in the future, as x/time/rate does.
//
// A limiter is a rate limit, not a fence: it hands out no tokens, and a
// jump of Redis's clock (an NTP step, a failover to a replica whose clock
// differs) changes how many events it lets through around the jump.

// Limiter is a rate limit on name kept in Redis. Make one with
// NewFixedWindow, NewSlidingWindow or NewTokenBucket; it is safe for
// concurrent use, and every Limiter of the same name and algorithm on one
// Redis shares the limit.
type Limiter struct {
	g        *Grantor
	name     string
	part     string
	script   *redis.Script
	limit    int           // events per window, or the bucket's burst
	window   time.Duration // fixed and sliding
	rate     float64       // token bucket: tokens per second
	maxDelay time.Duration
	err      error // from the constructor's arguments
}

// LimiterOption configures a Limiter.
type LimiterOption func(*Limiter)

// DefaultMaxDelay is how far ahead a Limiter books by default
// (WithMaxDelay).
const DefaultMaxDelay = time.Minute

// WithMaxDelay bounds how far in the future Reserve and Wait may book an
// event (default DefaultMaxDelay, 0 to 24h): a reservation that would have
// to wait longer is not OK and books nothing. It bounds what Redis keeps
// for future bookings.
func WithMaxDelay(d time.Duration) LimiterOption { return func(l *Limiter) { l.maxDelay = d } }

// Limits of the limiters' arguments.
const (
	// MaxLimit is the most events a window (or a bucket's burst) holds.
	MaxLimit = 1_000_000
	// MinWindow and MaxWindow bound a window's length.
	MinWindow = time.Millisecond
	MaxWindow = 24 * time.Hour
	// MaxRate is the fastest token bucket, in tokens per second.
	MaxRate = 1e9
)

// NewFixedWindow returns a limiter that lets n events through per window
// of Redis's clock, the windows aligned to multiples of window since the
// Unix epoch. Up to 2n events can pass within one window's length across
// a window boundary; a sliding window does not allow that.
func (g *Grantor) NewFixedWindow(name string, n int, window time.Duration, opts ...LimiterOption) *Limiter {
	l := &Limiter{g: g, name: name, part: "limit:fixed", script: fixedScript, limit: n, window: window}
	l.err = checkWindow(n, window)
	return l.with(opts)
}

// NewSlidingWindow returns a limiter that lets at most n events through
// in any interval of length window of Redis's clock (a log of the events'
// times in a sorted set: exact, and n entries of memory).
func (g *Grantor) NewSlidingWindow(name string, n int, window time.Duration, opts ...LimiterOption) *Limiter {
	l := &Limiter{g: g, name: name, part: "limit:sliding", script: slidingScript, limit: n, window: window}
	l.err = checkWindow(n, window)
	return l.with(opts)
}

// NewTokenBucket returns a token bucket limiter as golang.org/x/time/rate's
// Limiter: it fills at perSecond tokens a second up to burst, on Redis's
// clock; an event takes one token.
func (g *Grantor) NewTokenBucket(name string, perSecond float64, burst int, opts ...LimiterOption) *Limiter {
	l := &Limiter{g: g, name: name, part: "limit:bucket", script: bucketScript, limit: burst, rate: perSecond}
	switch {
	case !(perSecond > 0 && perSecond <= MaxRate):
		l.err = fmt.Errorf("%w: rate %v per second; want above 0, at most %g", fence.ErrInvalidArgument, perSecond, float64(MaxRate))
	case burst < 1 || burst > MaxLimit:
		l.err = fmt.Errorf("%w: burst %d; want 1 to %d", fence.ErrInvalidArgument, burst, MaxLimit)
	}
	return l.with(opts)
}

func checkWindow(n int, window time.Duration) error {
	switch {
	case n < 1 || n > MaxLimit:
		return fmt.Errorf("%w: %d events per window; want 1 to %d", fence.ErrInvalidArgument, n, MaxLimit)
	case window < MinWindow || window > MaxWindow:
		return fmt.Errorf("%w: window %v; want %v to %v", fence.ErrInvalidArgument, window, MinWindow, MaxWindow)
	}
	return nil
}

func (l *Limiter) with(opts []LimiterOption) *Limiter {
	l.maxDelay = DefaultMaxDelay
	for _, o := range opts {
		o(l)
	}
	if l.err == nil && (l.maxDelay < 0 || l.maxDelay > 24*time.Hour) {
		l.err = fmt.Errorf("%w: max delay %v; want 0 to 24h", fence.ErrInvalidArgument, l.maxDelay)
	}
	return l
}

// Reservation is an event booked by Reserve: when OK, it may happen after
// Delay. A booking is not withdrawn: an event reserved and not done still
// counts against the limit.
type Reservation struct {
	ok bool
	at time.Time // monotonic: when the event may happen
}

// OK reports whether the event was booked: false when it would have to
// wait longer than the limiter's max delay, or asks for more than the
// limit at once.
func (r *Reservation) OK() bool { return r.ok }

// Delay returns how long from now to wait before the event (0 when it may
// happen now, or when not OK).
func (r *Reservation) Delay() time.Duration {
	if !r.ok {
		return 0
	}
	return max(time.Until(r.at), 0)
}

// Allow is AllowN(ctx, 1).
func (l *Limiter) Allow(ctx context.Context) (bool, error) { return l.AllowN(ctx, 1) }

// AllowN reports whether n events may happen now, and books them if so.
// It is false, booking nothing, when they would have to wait (or n is
// above the limit).
func (l *Limiter) AllowN(ctx context.Context, n uint64) (bool, error) {
	r, err := l.reserve(ctx, "allow", n, 0)
	if err != nil {
		return false, err
	}
	return r.ok && r.Delay() == 0, nil
}

// Reserve is ReserveN(ctx, 1).
func (l *Limiter) Reserve(ctx context.Context) (*Reservation, error) { return l.ReserveN(ctx, 1) }

// ReserveN books n events at the earliest time the limit allows, at most
// the limiter's max delay ahead; the Reservation says when. Reservations
// are served in the order Redis runs them.
func (l *Limiter) ReserveN(ctx context.Context, n uint64) (*Reservation, error) {
	return l.reserve(ctx, "reserve", n, l.maxDelay)
}

// Wait is WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN books n events and sleeps until they may happen. It fails, booking
// nothing, when n is above the limit (fence.ErrInvalidArgument) or the
// wait would pass ctx's deadline or the max delay. If ctx ends while it
// sleeps it returns ctx's error; the booking stays used.
func (l *Limiter) WaitN(ctx context.Context, n uint64) error {
	maxd := l.maxDelay
	if dl, ok := ctx.Deadline(); ok {
		maxd = min(maxd, max(time.Until(dl), 0))
	}
	if n > uint64(l.limit) {
		return fmt.Errorf("redisgrant: wait %q: %w: %d events at once, above the limit of %d", l.name, fence.ErrInvalidArgument, n, l.limit)
	}
	r, err := l.reserve(ctx, "wait", n, maxd)
	if err != nil {
		return err
	}
	if !r.ok {
		return fmt.Errorf("redisgrant: wait %q: %w: %d events would have to wait longer than %v", l.name, fence.ErrNotGranted, n, maxd)
	}
	t := time.NewTimer(r.Delay())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("redisgrant: wait %q: %w", l.name, ctx.Err())
	}
}

// reserve runs the limiter's script: ARGV[1] limit, ARGV[2] window in µs
// or the rate per second, ARGV[3] n, ARGV[4] max delay in µs, ARGV[5] a
// random member prefix. Replies {1, delay µs} when booked, {0, needed
// delay µs or -1} otherwise.
func (l *Limiter) reserve(ctx context.Context, op string, n uint64, maxDelay time.Duration) (*Reservation, error) {
	if l.err != nil {
		return nil, fmt.Errorf("redisgrant: %s %q: %w", op, l.name, l.err)
	}
	if n < 1 {
		return nil, fmt.Errorf("redisgrant: %s %q: %w: %d events; want at least 1", op, l.name, fence.ErrInvalidArgument, n)
	}
	if n > uint64(l.limit) {
		return &Reservation{}, nil // never fits: not OK, nothing booked
	}
	ks, err := l.g.keys(l.name, l.part)
	if err != nil {
		return nil, fmt.Errorf("redisgrant: %s %q: %w", op, l.name, err)
	}
	if err := l.g.Check(ctx); err != nil {
		return nil, err
	}
	var second any = l.window.Microseconds()
	if l.rate > 0 {
		second = fmt.Sprintf("%.17g", l.rate)
	}
	r, err := l.script.Run(ctx, l.g.rdb, ks, l.limit, second, n, maxDelay.Microseconds(), newSecret()).Int64Slice()
	if err != nil {
		return nil, scriptError(op, l.name, err)
	}
	if r[0] != 1 {
		return &Reservation{}, nil
	}
	// The delay is from when Redis ran the script; counting it from the
	// reply's arrival, later, never lets the event happen before its
	// booked time.
	return &Reservation{ok: true, at: time.Now().Add(time.Duration(r[1]) * time.Microsecond)}, nil
}

// nowLua reads Redis's clock in microseconds (exact in a Lua number).
const nowLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, n, maxd = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
if n > limit then return {0, -1} end
`

// fixedScript: KEYS[1] a hash of window index -> events booked in it.
var fixedScript = redis.NewScript(nowLua + `
local w = tonumber(ARGV[2])
local idx = math.floor(now / w)
local j = idx
while true do
  local delay = math.max(0, j * w - now)
  if delay > maxd then return {0, delay} end
  local f = string.format('%.0f', j)
  local c = tonumber(redis.call('HGET', KEYS[1], f) or '0')
  if c + n <= limit then
    for _, old in ipairs(redis.call('HKEYS', KEYS[1])) do
      if tonumber(old) < idx then redis.call('HDEL', KEYS[1], old) end
    end
    redis.call('HINCRBY', KEYS[1], f, n)
    local keep = math.ceil(((j + 1) * w - now) / 1000) + 1000
    if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
    return {1, delay}
  end
  j = j + 1
end
`)

// slidingScript: KEYS[1] a sorted set of booked events scored by their
// time in µs. Bookings are made at non-decreasing times T, each such that
// (T - w, T] holds at most limit events with it; then every interval of
// length w does.
var slidingScript = redis.NewScript(nowLua + `
local w = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - w)
local at = now
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) > at then at = tonumber(newest[2]) end
local others = limit - n
if redis.call('ZCARD', KEYS[1]) > others then
  local e = redis.call('ZRANGE', KEYS[1], -(others + 1), -(others + 1), 'WITHSCORES')
  if tonumber(e[2]) + w > at then at = tonumber(e[2]) + w end
end
local delay = at - now
if delay > maxd then return {0, delay} end
-- ZADD in chunks, so that unpack stays within Lua's stack.
for first = 1, n, 1000 do
  local members = {}
  for i = first, math.min(first + 999, n) do
    members[#members + 1] = at
    members[#members + 1] = ARGV[5] .. ':' .. i
  end
  redis.call('ZADD', KEYS[1], unpack(members))
end
redis.call('PEXPIRE', KEYS[1], math.ceil((at + w - now) / 1000) + 1000)
return {1, delay}
`)

// bucketScript: KEYS[1] a hash {tokens, ts}: the tokens at ts (µs). It
// refills at ARGV[2] tokens per second up to the burst (ARGV[1]); a
// booking takes n tokens and may leave the bucket negative (a debt the
// refill pays before the next booking), as in golang.org/x/time/rate. A
// step back of Redis's clock refills nothing.
var bucketScript = redis.NewScript(nowLua + `
local rate = tonumber(ARGV[2])
local st = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(st[1]), tonumber(st[2])
if not tokens or not ts then tokens, ts = limit, now end
if now > ts then
  tokens = math.min(limit, tokens + (now - ts) * rate / 1000000)
  ts = now
end
local left = tokens - n
local delay = 0
if left < 0 then delay = math.ceil(-left * 1000000 / rate) end
if delay > maxd then return {0, delay} end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', left), 'ts', string.format('%.0f', ts))
redis.call('PEXPIRE', KEYS[1], math.ceil((limit - left) * 1000 / rate) + 1000)
return {1, delay}
`)
