package redisgrant

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/grantkeep"
)

// The lock of name is two keys in name's hash slot:
//
//   - the lease, a string "owner|token|sec|usec" (the grant's time on
//     Redis's clock) set with PX of the TTL: Redis's clock decides when it
//     ends, never the client's;
//   - the counter, a hash {token, issuer} without a TTL: every grant takes
//     token+1 (HINCRBY, which fails rather than pass 2^63-1). Release and
//     expiry never touch it. Its issuer is set by the first grant.
//
// Tokens go up to 2^63-1, beyond the 2^53 a Lua number holds exactly, so
// the scripts never hold a token in a Lua number that cannot hold it
// exactly: HINCRBY counts in Redis's 64-bit integers, its reply is used
// only below 2^53 and the new value is read back with HGET as a string
// above, and tokens are compared as strings. Every operation is one script, so Redis
// runs it with no other command in between.

// counterCheckLua stops a script whose counter holds anything but a token.
const counterCheckLua = `
local function fenced_counter(key)
  local c = redis.pcall('HMGET', key, 'token', 'issuer')
  if c.err then
    return nil, redis.error_reply('FENCED_CORRUPT ' .. key .. ' is not a hash')
  end
  if c[1] and (not string.match(c[1], '^[1-9][0-9]*$') or #c[1] > 19 or
      (#c[1] == 19 and c[1] > '9223372036854775807')) then
    return nil, redis.error_reply('FENCED_CORRUPT ' .. key .. ' holds token ' .. c[1])
  end
  return c, nil
end
local function fenced_next(key, c, issuer)
  if c[1] == '9223372036854775807' then return nil, redis.error_reply('FENCED_OVERFLOW the token counter is at 9223372036854775807') end
  local n = redis.call('HINCRBY', key, 'token', 1)
  if not c[2] then redis.call('HSET', key, 'issuer', issuer); c[2] = issuer end
  -- A Lua number holds the reply exactly below 2^53; above, read the
  -- decimal string back. '%d' (a C long, 32 bits on some builds) is far
  -- cheaper than '%.0f', so it writes the common small tokens.
  if n < 2147483648 then return string.format('%d', n), nil end
  if n < 9007199254740992 then return string.format('%.0f', n), nil end
  return redis.call('HGET', key, 'token'), nil
end
`

// leaseLua parses a lease value "owner|token|sec|usec" (nil for none).
const leaseLua = `
local function fenced_lease(v)
  if not v then return nil end
  local o, tok, sec, usec = string.match(v, '^(%x+)|(%d+)|(%d+)|(%d+)$')
  if not o then return nil, redis.error_reply('FENCED_CORRUPT lease holds ' .. v) end
  return {o, tok, sec, usec}
end
local function fenced_get(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then return nil, redis.error_reply('FENCED_CORRUPT ' .. key .. ' is not a string') end
  if not v then return nil end
  return fenced_lease(v)
end
`

// acquireScript: KEYS[1] lease, KEYS[2] counter; ARGV[1] owner, ARGV[2]
// ttl in ms, ARGV[3] an issuer for a new counter. Replies {1, token,
// issuer, sec, usec} when granted (or already granted to owner: a retried
// call), {0, holder's token, pttl} when held by another.
var acquireScript = redis.NewScript(counterCheckLua + leaseLua + `
local cur, err = fenced_get(KEYS[1])
if err then return err end
if cur then
  if cur[1] == ARGV[1] then
    local c = redis.call('HGET', KEYS[2], 'issuer')
    return {1, cur[2], c, cur[3], cur[4]}
  end
  return {0, cur[2], redis.call('PTTL', KEYS[1])}
end
local c
c, err = fenced_counter(KEYS[2])
if err then return err end
local tok
tok, err = fenced_next(KEYS[2], c, ARGV[3])
if err then return err end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. tok .. '|' .. t[1] .. '|' .. t[2], 'PX', ARGV[2])
return {1, tok, c[2], t[1], t[2]}
`)

// releaseScript: KEYS[1] lease; ARGV[1] owner, ARGV[2] channel. Replies
// 1 released, 0 not held (released or expired), 2 held by another owner.
// A release publishes the freed token on the channel, for waiters.
var releaseScript = redis.NewScript(leaseLua + `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and v.err then return redis.error_reply('FENCED_CORRUPT ' .. KEYS[1] .. ' is not a string') end
if not v then return 0 end
-- The owner's own lease, "owner|token|...", needs no full parse.
local p = #ARGV[1] + 1
if string.sub(v, 1, p) == ARGV[1] .. '|' then
  local e = string.find(v, '|', p + 1, true)
  if e then
    redis.call('DEL', KEYS[1])
    redis.call('PUBLISH', ARGV[2], string.sub(v, p + 1, e - 1))
    return 1
  end
end
local cur, err = fenced_lease(v)
if err then return err end
if cur[1] ~= ARGV[1] then return 2 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], cur[2])
return 1
`)

// renewScript: KEYS[1] lease; ARGV[1] owner, ARGV[2] token, ARGV[3] ttl in
// ms. Replies 1 renewed (the TTL restarts at Redis's now), 0 not held.
var renewScript = redis.NewScript(leaseLua + `
local cur, err = fenced_get(KEYS[1])
if err then return err end
if not cur or cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// verifyScript: KEYS[1] lease, KEYS[2] counter. Replies {holder's token or
// ”, pttl, issued_s, issued_us, issuer, counter}; it writes nothing.
var verifyScript = redis.NewScript(leaseLua + `
local cur, err = fenced_get(KEYS[1])
if err then return err end
local c = redis.call('HMGET', KEYS[2], 'issuer', 'token')
if not cur then return {'', -2, '', '', c[1] or '', c[2] or ''} end
return {cur[2], redis.call('PTTL', KEYS[1]), cur[3], cur[4], c[1] or '', c[2] or ''}
`)

// Lease is a fenced lock granted by Redis (a fence.Held): Redis holds it
// until its TTL, on Redis's clock, runs out after the grant or the last
// renewal Redis applied, or until Release. Its token is above every token
// the name's counter issued before. While it is held the grantor renews
// it every TTL/3 (internal/grantkeep); its validity, on this process's
// monotonic clock, is sent + TTL - fence.DefaultMargin(TTL) from just
// before the newest confirmed request was sent. A Lease is safe for
// concurrent use.
type Lease struct {
	*grantkeep.Hold
	g       *Grantor
	keys    []string
	channel string
	owner   string
	grant   fence.Grant

	mu       sync.Mutex
	released bool
}

var (
	_ fence.Grantor = (*Grantor)(nil)
	_ fence.Held    = (*Lease)(nil)
)

// Acquire implements fence.Grantor: it acquires the lock name for the TTL
// of fence.WithTTL (fence.DefaultGrantTTL by default). Without fence.Wait
// it fails with an error wrapping fence.ErrNotGranted when another owner
// holds name. With fence.Wait it waits: a waiter that finds the lock held
// subscribes to its release channel and looks again (so no release in
// between is missed), and looks again whenever a release is
// published, when the holder's TTL (as Redis reported it) runs out, or
// after the recheck interval (WithRecheck) without either; it never polls
// on a short timer. One Grantor's waiters for a name go first come, first
// served; waiters of different Grantors are not ordered (any may win a
// freed lock). If ctx ends first, Acquire returns an error
// wrapping ctx's error and holds nothing.
//
// A TTL outside fence.MinTTL..fence.MaxTTL or an invalid name (errors
// wrapping fence.ErrInvalidArgument), a Redis without Lua (ErrNoLua), an
// evicting maxmemory-policy (ErrEvictable) or keys in different slots
// (ErrCrossSlot) fail before anything is written. A grant whose reply
// arrives after its validity ran out is released and reported with
// fence.ErrLockLost. When the outcome is unknown (the reply was lost),
// Acquire releases whatever its owner token may hold before it returns the
// error (one attempt; the TTL ends a grant that release misses).
func (g *Grantor) Acquire(ctx context.Context, name string, opts ...fence.AcquireOption) (fence.Held, error) {
	o, err := fence.AcquireOptionsOf(opts...)
	if err != nil {
		return nil, fmt.Errorf("redisgrant: acquire %q: %w", name, err)
	}
	ks, err := g.keys(name, "lease", "counter")
	if err != nil {
		return nil, fmt.Errorf("redisgrant: acquire %q: %w", name, err)
	}
	if err := g.Check(ctx); err != nil {
		return nil, err
	}
	var l *Lease
	if o.Wait {
		l, err = waitFor(ctx, g, "acquire", name, g.channel(name, "lease"), func() (*Lease, time.Duration, error) {
			return g.try(ctx, name, ks, o.TTL)
		})
	} else {
		var busy bool
		l, _, err = g.try(ctx, name, ks, o.TTL)
		busy = err == nil && l == nil
		if busy {
			err = fmt.Errorf("redisgrant: acquire %q: %w: held by another owner", name, fence.ErrNotGranted)
		}
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// try runs the acquire script once. It returns the lease, or nil and the
// holder's remaining TTL as Redis reported it.
func (g *Grantor) try(ctx context.Context, name string, ks []string, ttl time.Duration) (*Lease, time.Duration, error) {
	owner := newSecret()
	sent := time.Now()
	r, err := acquireScript.Run(ctx, g.rdb, ks, owner, ttl.Milliseconds(), g.issuer).Slice()
	if err != nil {
		if unknownOutcome(err) {
			g.withdraw(ctx, ks[0], name, owner)
		}
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("redisgrant: acquire %q: %w", name, ctx.Err())
		}
		return nil, 0, scriptError("acquire", name, err)
	}
	if n, _ := r[0].(int64); n == 0 {
		pttl, _ := r[2].(int64)
		return nil, time.Duration(max(pttl, 0)) * time.Millisecond, nil
	}
	tok, err := fence.ParseToken(str(r[1]))
	if err != nil {
		return nil, 0, fmt.Errorf("redisgrant: acquire %q: %w: %v", name, ErrCorrupt, err)
	}
	l := &Lease{g: g, keys: ks, channel: g.channel(name, "lease"), owner: owner, grant: fence.Grant{
		Name: name, Kind: fence.KindLock, Scope: name, Token: tok, Issuer: str(r[2]), TTL: ttl,
		IssuedAt: serverTime(atoi(r[3]), atoi(r[4])),
	}}
	l.Hold = grantkeep.Start(sent, ttl, fmt.Sprintf("lock %q (token %d)", name, tok), l.renew)
	if !l.Valid() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		l.Release(rctx)
		return nil, 0, fmt.Errorf("redisgrant: acquire %q: %w: granted with token %d after its validity ran out; released", name, fence.ErrLockLost, tok)
	}
	return l, 0, nil
}

// withdraw releases what owner may hold after an acquire whose outcome is
// unknown, once, best effort.
func (g *Grantor) withdraw(ctx context.Context, lease, name, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	releaseScript.Run(rctx, g.rdb, []string{lease}, owner, g.channel(name, "lease"))
}

// Verify reports whether t is the token of the lease in force for name,
// and returns that lease's grant (zero when nobody holds it; its TTL is
// what Redis has left of it). It writes nothing. Redis's answer is the
// state at one instant: the lease may end right after; only the token
// check at the resource decides a write.
func (g *Grantor) Verify(ctx context.Context, name string, t fence.Token) (bool, fence.Grant, error) {
	ks, err := g.keys(name, "lease", "counter")
	if err != nil {
		return false, fence.Grant{}, fmt.Errorf("redisgrant: verify %q: %w", name, err)
	}
	if err := fence.ValidateToken(t); err != nil {
		return false, fence.Grant{}, fmt.Errorf("redisgrant: verify %q: %w", name, err)
	}
	if err := g.Check(ctx); err != nil {
		return false, fence.Grant{}, err
	}
	r, err := verifyScript.Run(ctx, g.rdb, ks).Slice()
	if err != nil {
		return false, fence.Grant{}, scriptError("verify", name, err)
	}
	if str(r[0]) == "" {
		return false, fence.Grant{}, nil
	}
	tok, err := fence.ParseToken(str(r[0]))
	if err != nil {
		return false, fence.Grant{}, fmt.Errorf("redisgrant: verify %q: %w: %v", name, ErrCorrupt, err)
	}
	pttl, _ := r[1].(int64)
	h := fence.Grant{Name: name, Kind: fence.KindLock, Scope: name, Token: tok, Issuer: str(r[4]),
		TTL: time.Duration(max(pttl, 0)) * time.Millisecond, IssuedAt: serverTime(atoi(r[2]), atoi(r[3]))}
	return tok == t, h, nil
}

// Token returns the lease's fencing token: send it with every write to the
// protected resource.
func (l *Lease) Token() fence.Token { return l.grant.Token }

// Grant implements fence.Held. Its Session is 0 (a Redis lease has no
// session); IssuedAt is Redis's clock, for display only.
func (l *Lease) Grant() fence.Grant { return l.grant }

// Owner returns the lease's owner token: the random secret that proves
// ownership to release and renew. It is not a fencing token and never goes
// to the resource; treat it like a password.
func (l *Lease) Owner() string { return l.owner }

// Release implements fence.Held: the Context is cancelled first, with
// fence.ErrReleased, then Redis deletes the lease if this owner still
// holds it and publishes the release for waiters. It returns
// fence.Released, fence.AlreadyReleased (nobody held it: released before,
// or its TTL ran out in Redis) or fence.NotOwned (its TTL ran out and
// another owner holds the lock now; work done under the lease may have
// overlapped theirs). A network error leaves the outcome unknown; Redis
// then ends the lease with its TTL.
func (l *Lease) Release(ctx context.Context) (fence.ReleaseResult, error) {
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.End(fence.ErrReleased)
	n, err := releaseScript.Run(ctx, l.g.rdb, l.keys[:1], l.owner, l.channel).Int64()
	if err != nil {
		return "", scriptError("release", l.grant.Name, err)
	}
	return releaseResult(n), nil
}

// releaseResult reads the reply of a release script: 1 released, 2 held
// by another owner, anything else not held.
func releaseResult(n int64) fence.ReleaseResult {
	switch n {
	case 1:
		return fence.Released
	case 2:
		return fence.NotOwned
	}
	return fence.AlreadyReleased
}

// renew is the lease's grantkeep.RenewFunc: one renewal script, which
// restarts the TTL on Redis's clock if this owner still holds the lease.
func (l *Lease) renew(ctx context.Context) error {
	n, err := renewScript.Run(ctx, l.g.rdb, l.keys[:1], l.owner, l.grant.Token.String(), l.grant.TTL.Milliseconds()).Int64()
	switch {
	case err != nil:
		return scriptError("renew", l.grant.Name, err)
	case n != 1:
		return fmt.Errorf("%w: the lease is gone in Redis (its TTL ran out, or it was released)", fence.ErrLockLost)
	}
	return nil
}

// Renew implements fence.Held: it renews the lease now for its TTL,
// keeping its token. After Release it fails with fence.ErrReleased.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return fmt.Errorf("redisgrant: renew %q: %w", l.grant.Name, fence.ErrReleased)
	}
	if err := l.Hold.Renew(ctx); err != nil {
		return fmt.Errorf("redisgrant: %w", err)
	}
	return nil
}

// Verify implements fence.Held: nil when Redis has this lease in force,
// else an error wrapping fence.ErrLockLost (and the lease ends). A nil is
// the state at one instant, not a promise for the next write.
func (l *Lease) Verify(ctx context.Context) error {
	ok, _, err := l.g.Verify(ctx, l.grant.Name, l.grant.Token)
	if err != nil {
		return err
	}
	if !ok {
		err := fmt.Errorf("redisgrant: verify %q: %w: token %d is no longer in force in Redis", l.grant.Name, fence.ErrLockLost, l.grant.Token)
		l.End(err)
		return err
	}
	return nil
}

// str returns a script reply element as a string ("" for nil).
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

// atoi returns a script reply element as an int64 (0 when it is none).
func atoi(v any) int64 {
	n, _ := strconv.ParseInt(str(v), 10, 64)
	return n
}
