package redisfence

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	fence "github.com/fenced-dev/fenced"
)

// Set stores value at key, as SET does, when t is not below key's
// watermark, and raises the watermark to t. The check, the SET and the
// raise are one script.
//
// ttl is the key's expiry: 0 for none, redis.KeepTTL to keep the key's
// current one, or at least a millisecond. The watermark key never expires:
// a writer paused for longer than ttl must still be rejected.
//
// value is sent as go-redis sends command arguments (string, []byte,
// numbers, bool, time.Time, encoding.BinaryMarshaler). Errors: see Guard;
// fence.ErrInvalidArgument for a bad ttl.
func (g *Guard) Set(ctx context.Context, key string, t fence.Token, value any, ttl time.Duration) error {
	mode, ms := "", ""
	switch {
	case ttl == 0:
	case ttl == redis.KeepTTL:
		mode = "KEEPTTL"
	case ttl >= time.Millisecond:
		mode, ms = "PX", strconv.FormatInt(ttl.Milliseconds(), 10)
	default:
		return fmt.Errorf("%w: ttl %v; want 0 (no expiry), redis.KeepTTL or at least 1ms", fence.ErrInvalidArgument, ttl)
	}
	_, err := g.run(ctx, "set", setScript, key, t, value, mode, ms)
	return err
}

// HSet sets fields of the hash at key, as HSET does, when t is not below
// key's watermark, and raises the watermark to t; it returns the number of
// fields that were added (not updated). values is either field, value
// pairs ("name", "ada", "age", 36) or a single map[string]string or
// map[string]any. If key holds another type, HSET's WRONGTYPE error is
// returned and nothing, not even the watermark, changes.
//
// Errors: see Guard; fence.ErrInvalidArgument for no fields or an odd
// number of values.
func (g *Guard) HSet(ctx context.Context, key string, t fence.Token, values ...any) (int64, error) {
	args, err := fieldValues(values)
	if err != nil {
		return 0, err
	}
	v, err := g.run(ctx, "hset", hsetScript, key, t, args...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return n, nil
}

// Del deletes key, as DEL does, when t is not below key's watermark, and
// raises the watermark to t; it returns 1 if the key existed and 0 if not.
//
// The watermark key is kept (and raised even when key did not exist), so a
// stale writer cannot recreate the key after the deletion. Deleting the
// watermark key is up to the caller, and safe only once no writer with an
// older token can still be running.
func (g *Guard) Del(ctx context.Context, key string, t fence.Token) (int64, error) {
	v, err := g.run(ctx, "del", delScript, key, t)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	return n, nil
}

// fieldValues flattens HSet's values into field, value pairs.
func fieldValues(values []any) ([]any, error) {
	if len(values) == 1 {
		var args []any
		switch m := values[0].(type) {
		case map[string]string:
			for _, f := range sortedKeys(m) {
				args = append(args, f, m[f])
			}
		case map[string]any:
			for _, f := range sortedKeys(m) {
				args = append(args, f, m[f])
			}
		default:
			return nil, fmt.Errorf("%w: hset takes field, value pairs or one map[string]string or map[string]any, not a %T", fence.ErrInvalidArgument, values[0])
		}
		values = args
	}
	if len(values) == 0 || len(values)%2 != 0 {
		return nil, fmt.Errorf("%w: hset needs at least one field and a value for each field; got %d values", fence.ErrInvalidArgument, len(values))
	}
	return values, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
