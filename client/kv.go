package client

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
	"github.com/fenced-dev/fenced/internal/wire/wireconnect"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// ErrKeyNotFound reports a kv key that does not exist (never written, or
// deleted).
var ErrKeyNotFound = errors.New("client: key not found")

// KVEntry is a key of the server's fenced kv.
type KVEntry struct {
	// Value is the stored value.
	Value []byte
	// Version counts the key's writes and never repeats; pass it to
	// IfVersion for an optimistic update.
	Version uint64
	// Token is the key's watermark: writes need a token at least this high.
	Token fence.Token
}

// KVOption changes one kv write.
type KVOption func(*kvOptions)

type kvOptions struct {
	ifVersion *uint64
	issuer    string
}

// IfVersion makes the write conditional: it applies only when the key's
// version is v (0: the key must not exist).
func IfVersion(v uint64) KVOption { return func(o *kvOptions) { o.ifVersion = &v } }

// WithIssuer presents the issuer of the token (Grant.Issuer); the server
// rejects a token of another cluster with fence.ErrIssuerMismatch.
func WithIssuer(issuer string) KVOption { return func(o *kvOptions) { o.issuer = issuer } }

func kvOpts(opts []KVOption) kvOptions {
	var o kvOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// KVPut stores value (up to 1 MiB) under key with token t, the token of the
// caller's grant. It returns the key's new version. A token below the key's
// watermark is rejected with a *fence.StaleTokenError (errors.As) carrying
// the required token; a failed IfVersion with a *fence.VersionMismatchError
// (errors.Is fence.ErrVersionMismatch) carrying the key's current version.
// A token that no grant in force holds for a scope covering key (the lock
// "orders" writes "orders" and "orders/17"; a released or expired grant's
// token writes nothing) is rejected with a *fence.ScopeMismatchError
// naming the scope the token belongs to (docs/scopes.md).
//
// A put that fails on the network is retried, with the same request id,
// until ctx ends; the server applies it once and answers a retry with the
// original result (it remembers the newest 4096 kv writes).
func (c *Client) KVPut(ctx context.Context, key string, value []byte, t fence.Token, opts ...KVOption) (uint64, error) {
	o := kvOpts(opts)
	if err := validateKV(key, t); err != nil {
		return 0, err
	}
	var version uint64
	id := newRequestID()
	err := c.retry(ctx, "kv put", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.kvPut(ctx, &fencedv1.KVPutRequest{Key: key, Value: value, Token: uint64(t), IfVersion: o.ifVersion, Issuer: o.issuer, RequestId: id})
		if err != nil {
			return kvError(key, t, err)
		}
		version = r.GetVersion()
		return nil
	})
	return version, err
}

// KVDelete removes key with token t. The key's watermark stays, so a stale
// writer cannot recreate it. It reports whether the key existed; errors as
// for KVPut.
func (c *Client) KVDelete(ctx context.Context, key string, t fence.Token, opts ...KVOption) (bool, error) {
	o := kvOpts(opts)
	if err := validateKV(key, t); err != nil {
		return false, err
	}
	var deleted bool
	id := newRequestID()
	err := c.retry(ctx, "kv delete", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.kv.Delete(ctx, connect.NewRequest(&fencedv1.KVDeleteRequest{Key: key, Token: uint64(t), IfVersion: o.ifVersion, Issuer: o.issuer, RequestId: id}))
		if err != nil {
			return kvError(key, t, err)
		}
		deleted = r.Msg.GetDeleted()
		return nil
	})
	return deleted, err
}

// KVGet returns key's value, version and watermark, or ErrKeyNotFound.
func (c *Client) KVGet(ctx context.Context, key string) (KVEntry, error) {
	if err := fence.ValidateName(key); err != nil {
		return KVEntry{}, fmt.Errorf("client: key: %w", err)
	}
	var out *fencedv1.KVGetResponse
	err := c.retry(ctx, "kv get", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.kv.Get(ctx, connect.NewRequest(&fencedv1.KVGetRequest{Key: key}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return KVEntry{}, err
	}
	e := KVEntry{Value: out.GetValue(), Version: out.GetVersion(), Token: fence.Token(out.GetToken())}
	if !out.GetFound() {
		return e, fmt.Errorf("%w: %q", ErrKeyNotFound, key)
	}
	return e, nil
}

func validateKV(key string, t fence.Token) error {
	if err := fence.ValidateName(key); err != nil {
		return fmt.Errorf("client: key: %w", err)
	}
	if err := fence.ValidateToken(t); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	return nil
}

// kvError turns the server's refusal of a kv write into the fence error it
// carries, with the key and the token sent as the fallback for the fields
// of a stale-token answer.
func kvError(key string, t fence.Token, err error) error {
	return wireconnect.Decode(err, wire.Call{Object: key, Token: t})
}
