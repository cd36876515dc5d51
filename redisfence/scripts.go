package redisfence

import "github.com/redis/go-redis/v9"

// Every script is called with KEYS[1] = the protected key, KEYS[2] = its
// watermark key, ARGV[1] = the presented token in decimal, then the
// command's own arguments. Both keys are declared, so Redis Cluster routes
// the script to the node that owns their (common) slot and Redis checks
// that they share it.
//
// Tokens go up to 2^63-1, beyond the 2^53 a Lua number (a double) holds
// exactly, so tokens are compared as canonical decimal strings: the shorter
// one is smaller, equal lengths compare byte by byte.

// checkLua is the watermark rule, run first by every script. It stops the
// script with a FENCED_STALE error carrying the watermark when the token is
// below it, and leaves fenced_raise true when the token must become the
// new watermark. It reads only; the caller raises the watermark (raiseLua)
// in the same script.
const checkLua = `
local fenced_token = ARGV[1]
if not string.match(fenced_token, '^[1-9][0-9]*$') or #fenced_token > 19 then
  return redis.error_reply('ERR fenced: presented token is not a decimal number from 1 to 9223372036854775807')
end
local function fenced_less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local fenced_mark = redis.call('GET', KEYS[2])
if fenced_mark then
  if not string.match(fenced_mark, '^[1-9][0-9]*$') or #fenced_mark > 19 or
     fenced_less('9223372036854775807', fenced_mark) then
    return redis.error_reply('FENCED_CORRUPT watermark is not a token')
  end
  if fenced_less(fenced_token, fenced_mark) then
    return redis.error_reply('FENCED_STALE ' .. fenced_mark)
  end
end
local fenced_raise = (not fenced_mark) or fenced_less(fenced_mark, fenced_token)
`

// raiseLua stores the presented token as the new watermark when it is above
// the old one. The watermark key has no TTL.
const raiseLua = `
if fenced_raise then redis.call('SET', KEYS[2], fenced_token) end
`

// The write scripts run their command with redis.pcall first and return its
// error untouched, before raising the watermark: a command that fails
// (WRONGTYPE, out of memory) changes nothing, not even the watermark.

// checkScript raises the watermark without a write: Guard.Check.
var checkScript = redis.NewScript(checkLua + raiseLua + `
return 'OK'
`)

// setScript: ARGV[2] value, ARGV[3] "" | "PX" | "KEEPTTL", ARGV[4] ms.
var setScript = redis.NewScript(checkLua + `
local r
if ARGV[3] == 'PX' then
  r = redis.pcall('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
elseif ARGV[3] == 'KEEPTTL' then
  r = redis.pcall('SET', KEYS[1], ARGV[2], 'KEEPTTL')
else
  r = redis.pcall('SET', KEYS[1], ARGV[2])
end
if type(r) == 'table' and r.err then return r end
` + raiseLua + `
return r
`)

// hsetScript: ARGV[2..] field, value, field, value ... HSET is sent in
// chunks so that unpack stays within Lua's stack; only the first chunk can
// fail (WRONGTYPE), before anything was written.
var hsetScript = redis.NewScript(checkLua + `
local n = 0
for i = 2, #ARGV, 1000 do
  local r = redis.pcall('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  if type(r) == 'table' and r.err then return r end
  n = n + r
end
` + raiseLua + `
return n
`)

// delScript deletes the key and keeps (raises) its watermark.
var delScript = redis.NewScript(checkLua + `
local r = redis.pcall('DEL', KEYS[1])
if type(r) == 'table' and r.err then return r end
` + raiseLua + `
return r
`)

// watermarkScript reads a watermark. It is a script rather than a GET so
// that a Guard needs nothing but a redis.Scripter.
var watermarkScript = redis.NewScript(`return redis.call('GET', KEYS[1])`)

// evalPrefix and evalSuffix wrap a caller's script (see NewScript). The
// caller's source starts on line 1, so line numbers in Lua errors match it.
// Its function is defined before the check's locals, so it cannot see or
// change them; its parameters shadow the global KEYS and ARGV.
const (
	evalPrefix = `local function fenced_body(KEYS, ARGV, FENCING_TOKEN) `
	evalSuffix = `
end
` + checkLua + raiseLua + `
local fenced_keys = {KEYS[1]}
for i = 3, #KEYS do fenced_keys[#fenced_keys + 1] = KEYS[i] end
local fenced_argv = {}
for i = 2, #ARGV do fenced_argv[#fenced_argv + 1] = ARGV[i] end
return fenced_body(fenced_keys, fenced_argv, fenced_token)
`
)
