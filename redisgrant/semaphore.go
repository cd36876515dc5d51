package redisgrant

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/grantkeep"
)

// A semaphore of name is two keys in name's hash slot:
//
//   - the permits, a hash: "cap" the capacity, and one field "s<slot>" per
//     live permit, "owner|token|deadline", the deadline in ms on Redis's
//     clock (TIME). Every script first treats permits past their deadline
//     as gone (the writing ones delete them), so expiry is decided by
//     Redis's clock. The hash has a PEXPIRE of its last deadline, so it
//     disappears with its last permit;
//   - the counter, as for a lock (a hash {token, issuer} without a TTL):
//     every permit takes token+1.

// semLua reads the permits hash: sem_cap, sem_live (slot -> {owner,
// token, deadline}), sem_next (ms until the first deadline, or -1), and
// deletes expired permits when purge is set.
const semLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function sem_read(key, purge)
  local ty = redis.call('TYPE', key).ok
  if ty ~= 'hash' and ty ~= 'none' then
    return nil, nil, nil, redis.error_reply('FENCED_CORRUPT ' .. key .. ' is not a hash')
  end
  local all = redis.call('HGETALL', key)
  local cap, live, nxt = nil, {}, -1
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if f == 'cap' then
      cap = tonumber(v)
    else
      local o, tok, dl = string.match(v, '^(%x+)|(%d+)|(%d+)$')
      local slot = tonumber(string.sub(f, 2))
      if not o or not slot then
        return nil, nil, nil, redis.error_reply('FENCED_CORRUPT ' .. key .. ' field ' .. f)
      end
      dl = tonumber(dl)
      if dl <= now then
        if purge then redis.call('HDEL', key, f) end
      else
        live[slot] = {o, tok, dl}
        if nxt < 0 or dl - now < nxt then nxt = dl - now end
      end
    end
  end
  return cap, live, nxt, nil
end
local function sem_expire(key, live)
  local last = 0
  for _, p in pairs(live) do if p[3] > last then last = p[3] end end
  if last > now then redis.call('PEXPIREAT', key, last) end
end
`

// semAcquireScript: KEYS[1] permits, KEYS[2] counter; ARGV[1] owner,
// ARGV[2] capacity, ARGV[3] k, ARGV[4] ttl ms, ARGV[5] an issuer for a new
// counter. Replies {1, issuer, sec, usec, slot, token, slot, token ...}
// when granted (or already granted to owner), {0, ms until the first
// deadline or -1, free} otherwise.
var semAcquireScript = redis.NewScript(counterCheckLua + semLua + `
local cap, live, nxt, err = sem_read(KEYS[1], true)
if err then return err end
local want, k = tonumber(ARGV[2]), tonumber(ARGV[3])
local mine, n = {}, 0
for slot, p in pairs(live) do
  n = n + 1
  if p[1] == ARGV[1] then mine[#mine + 1] = slot end
end
if n > 0 and cap ~= want then
  return redis.error_reply('FENCED_CAPACITY semaphore has capacity ' .. tostring(cap) .. ' while permits are live; asked with ' .. ARGV[2])
end
if #mine > 0 then
  table.sort(mine)
  local c = redis.call('HGET', KEYS[2], 'issuer')
  local out = {1, c, t[1], t[2]}
  for _, slot in ipairs(mine) do out[#out + 1] = slot; out[#out + 1] = live[slot][2] end
  return out
end
if want - n < k then return {0, nxt, want - n} end
redis.call('HSET', KEYS[1], 'cap', ARGV[2])
local c
c, err = fenced_counter(KEYS[2])
if err then return err end
local out = {1, '', t[1], t[2]}
local dl = now + tonumber(ARGV[4])
for slot = 0, want - 1 do
  if #out >= 4 + 2 * k then break end
  if not live[slot] then
    local tok
    tok, err = fenced_next(KEYS[2], c, ARGV[5])
    if err then return err end
    redis.call('HSET', KEYS[1], 's' .. slot, ARGV[1] .. '|' .. tok .. '|' .. dl)
    live[slot] = {ARGV[1], tok, dl}
    out[#out + 1] = slot; out[#out + 1] = tok
  end
end
out[2] = c[2]
sem_expire(KEYS[1], live)
return out
`)

// semReleaseScript: KEYS[1] permits; ARGV[1] owner, ARGV[2] channel,
// ARGV[3..] the owner's slots. Replies 1 released, 0 none held, 2 one of
// the slots is held by another owner.
var semReleaseScript = redis.NewScript(semLua + `
local cap, live, nxt, err = sem_read(KEYS[1], true)
if err then return err end
local freed = 0
for slot, p in pairs(live) do
  if p[1] == ARGV[1] then redis.call('HDEL', KEYS[1], 's' .. slot); freed = freed + 1 end
end
if freed > 0 then
  redis.call('PUBLISH', ARGV[2], freed)
  return 1
end
for i = 3, #ARGV do
  if live[tonumber(ARGV[i])] then return 2 end
end
return 0
`)

// semRenewScript: KEYS[1] permits; ARGV[1] owner, ARGV[2] ttl ms, ARGV[3]
// how many permits the owner holds. Replies 1 renewed, 0 lost (some are
// gone).
var semRenewScript = redis.NewScript(semLua + `
local cap, live, nxt, err = sem_read(KEYS[1], true)
if err then return err end
local n = 0
for _, p in pairs(live) do if p[1] == ARGV[1] then n = n + 1 end end
if n ~= tonumber(ARGV[3]) then return 0 end
local dl = now + tonumber(ARGV[2])
for slot, p in pairs(live) do
  if p[1] == ARGV[1] then
    redis.call('HSET', KEYS[1], 's' .. slot, p[1] .. '|' .. p[2] .. '|' .. dl)
    p[3] = dl
  end
end
sem_expire(KEYS[1], live)
return 1
`)

// Semaphore is a counting semaphore of a fixed capacity in Redis, with
// the shape of the fenced SDK's client.Semaphore. Each permit has its own
// fencing token and a slot 0..capacity-1, unique among the live permits:
// fence the resource of a slot as the object Permit.Scope() ("name/slot"),
// so that the next holder of a slot fences out a paused earlier one.
//
// The capacity is fixed while any permit is live: an Acquire with another
// capacity fails with an error wrapping fence.ErrCapacityMismatch and
// changes nothing. Unlike the server's, waiters are not queued: when
// permits are freed, any waiter whose request fits may take them, so a
// large request can wait while smaller ones keep succeeding.
type Semaphore struct {
	g        *Grantor
	name     string
	capacity int
	ttl      time.Duration
}

// NewSemaphore returns the semaphore name of capacity permits, each held
// for ttl (0: fence.DefaultGrantTTL) from its grant or last renewal on
// Redis's clock and renewed every ttl/3 while held. It does not contact
// Redis; Acquire and TryAcquire check the arguments.
func (g *Grantor) NewSemaphore(name string, capacity int, ttl time.Duration) *Semaphore {
	if ttl == 0 {
		ttl = fence.DefaultGrantTTL
	}
	return &Semaphore{g: g, name: name, capacity: capacity, ttl: ttl}
}

// MaxCapacity is the largest capacity of a semaphore: every operation
// reads all permits of the semaphore, so it is smaller than the server's.
const MaxCapacity = 10_000

// Permit is one permit of a semaphore.
type Permit struct {
	// Slot is 0 to capacity-1, unique among the semaphore's live permits.
	Slot int
	// Token is the permit's fencing token.
	Token fence.Token
	// Grant is the permit's grant (Kind fence.KindPermit, Scope
	// "name/slot").
	Grant fence.Grant
}

// Scope returns the object that fences this permit's slot: "name/slot".
func (p Permit) Scope() string { return p.Grant.Scope }

// Permits are the permits one Acquire took, held and renewed together.
// Their Context is cancelled when they are released or can no longer be
// trusted (a renewal found one gone, or their validity ran out).
type Permits struct {
	*grantkeep.Hold
	sem   *Semaphore
	keys  []string
	owner string
	list  []Permit
}

// List returns the permits, by slot.
func (p *Permits) List() []Permit { return append([]Permit(nil), p.list...) }

// Acquire takes k permits at once (1 to the capacity), waiting while fewer
// are free: woken by a release's pub/sub message, at the first permit's
// deadline as Redis reported it, or after the recheck interval. If ctx
// ends first it returns an error wrapping ctx's error and holds nothing.
func (m *Semaphore) Acquire(ctx context.Context, k int) (*Permits, error) {
	return m.acquire(ctx, k, true)
}

// TryAcquire takes k permits if they are free, without waiting; otherwise
// it fails with an error wrapping fence.ErrNotGranted. An invalid name,
// capacity, k or TTL is an error wrapping fence.ErrInvalidArgument, and
// nothing is written.
func (m *Semaphore) TryAcquire(ctx context.Context, k int) (*Permits, error) {
	return m.acquire(ctx, k, false)
}

func (m *Semaphore) validate(k int) error {
	if err := fence.ValidateTTL(m.ttl); err != nil {
		return err
	}
	if m.capacity < 1 || m.capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity is %d; a semaphore has 1 to %d permits", fence.ErrInvalidArgument, m.capacity, MaxCapacity)
	}
	if k < 1 || k > m.capacity {
		return fmt.Errorf("%w: %d permits asked of a semaphore of capacity %d; ask for 1 to %d", fence.ErrInvalidArgument, k, m.capacity, m.capacity)
	}
	return nil
}

func (m *Semaphore) acquire(ctx context.Context, k int, wait bool) (*Permits, error) {
	op := "try acquire"
	if wait {
		op = "acquire"
	}
	if err := m.validate(k); err != nil {
		return nil, fmt.Errorf("redisgrant: %s semaphore %q: %w", op, m.name, err)
	}
	ks, err := m.g.keys(m.name, "sem", "sem-counter")
	if err != nil {
		return nil, fmt.Errorf("redisgrant: %s semaphore %q: %w", op, m.name, err)
	}
	if err := m.g.Check(ctx); err != nil {
		return nil, err
	}
	if !wait {
		p, _, err := m.try(ctx, ks, k)
		if err == nil && p == nil {
			err = fmt.Errorf("redisgrant: %s semaphore %q: %w: fewer than %d of %d permits free", op, m.name, fence.ErrNotGranted, k, m.capacity)
		}
		return p, err
	}
	return waitFor(ctx, m.g, op+" semaphore", m.name, m.g.channel(m.name, "sem"), func() (*Permits, time.Duration, error) {
		return m.try(ctx, ks, k)
	})
}

// try runs the acquire script once.
func (m *Semaphore) try(ctx context.Context, ks []string, k int) (*Permits, time.Duration, error) {
	owner := newSecret()
	sent := time.Now()
	r, err := semAcquireScript.Run(ctx, m.g.rdb, ks, owner, m.capacity, k, m.ttl.Milliseconds(), m.g.issuer).Slice()
	if err != nil {
		if unknownOutcome(err) {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			semReleaseScript.Run(rctx, m.g.rdb, ks[:1], owner, m.g.channel(m.name, "sem"))
			cancel()
		}
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("redisgrant: acquire semaphore %q: %w", m.name, ctx.Err())
		}
		return nil, 0, scriptError("acquire semaphore", m.name, err)
	}
	if n, _ := r[0].(int64); n == 0 {
		next, _ := r[1].(int64)
		return nil, time.Duration(max(next, 0)) * time.Millisecond, nil
	}
	p := &Permits{sem: m, keys: ks, owner: owner}
	issuer, at := str(r[1]), serverTime(atoi(r[2]), atoi(r[3]))
	for i := 4; i+1 < len(r); i += 2 {
		slot := int(atoi(r[i]))
		tok, err := fence.ParseToken(str(r[i+1]))
		if err != nil {
			return nil, 0, fmt.Errorf("redisgrant: acquire semaphore %q: %w: %v", m.name, ErrCorrupt, err)
		}
		scope := m.name + "/" + strconv.Itoa(slot)
		p.list = append(p.list, Permit{Slot: slot, Token: tok, Grant: fence.Grant{
			Name: m.name, Kind: fence.KindPermit, Scope: scope, Token: tok, Issuer: issuer, TTL: m.ttl, IssuedAt: at,
		}})
	}
	p.Hold = grantkeep.Start(sent, m.ttl, fmt.Sprintf("%d permits of semaphore %q", len(p.list), m.name), p.renew)
	if !p.Valid() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		p.Release(rctx)
		return nil, 0, fmt.Errorf("redisgrant: acquire semaphore %q: %w: granted after its validity ran out; released", m.name, fence.ErrLockLost)
	}
	return p, 0, nil
}

// renew is the permits' grantkeep.RenewFunc.
func (p *Permits) renew(ctx context.Context) error {
	n, err := semRenewScript.Run(ctx, p.sem.g.rdb, p.keys[:1], p.owner, p.sem.ttl.Milliseconds(), len(p.list)).Int64()
	switch {
	case err != nil:
		return scriptError("renew semaphore", p.sem.name, err)
	case n != 1:
		return fmt.Errorf("%w: permits of semaphore %q are gone in Redis (their TTL ran out)", fence.ErrLockLost, p.sem.name)
	}
	return nil
}

// Release releases every permit: the Context is cancelled first, with
// fence.ErrReleased. It returns fence.Released, fence.AlreadyReleased
// (they had ended: their TTL ran out) or fence.NotOwned (they had ended
// and one of their slots is held by another owner now).
func (p *Permits) Release(ctx context.Context) (fence.ReleaseResult, error) {
	p.End(fence.ErrReleased)
	args := []any{p.owner, p.sem.g.channel(p.sem.name, "sem")}
	for _, x := range p.list {
		args = append(args, x.Slot)
	}
	n, err := semReleaseScript.Run(ctx, p.sem.g.rdb, p.keys[:1], args...).Int64()
	if err != nil {
		return "", scriptError("release semaphore", p.sem.name, err)
	}
	return releaseResult(n), nil
}
