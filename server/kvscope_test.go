package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// Through the Connect API and the SDK: a token is authority only for the
// scope of its live grant, and --kv-scope maps keys to another scope; the
// refusal names the scope the token belongs to and changes nothing.
func TestKVScope_ConnectAPIAndMapping(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) {
		c.KVScopes = []server.KVScope{{Prefix: "cache", Scope: "billing"}, {Prefix: "cache/hot", Scope: "hot"}}
	})
	hc := h2cClient(nil)
	base := "http://" + srv.Addr()
	ctx := context.Background()
	locks := fencedv1connect.NewLockServiceClient(hc, base)
	grant := func(name string) *fencedv1.Grant {
		resp, err := locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, TtlMs: 60000}))
		if err != nil || !resp.Msg.Granted {
			t.Fatalf("acquire %q: %v %v", name, resp, err)
		}
		if resp.Msg.Grant.Kind != "lock" || resp.Msg.Grant.Scope != name {
			t.Fatalf("grant of %q has kind %q scope %q, want lock %q", name, resp.Msg.Grant.Kind, resp.Msg.Grant.Scope, name)
		}
		return resp.Msg.Grant
	}
	a, b, cache, billing, hot := grant("a"), grant("b"), grant("cache"), grant("billing"), grant("hot")
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	put := func(key string, g *fencedv1.Grant) error {
		_, err := c.KVPut(ctx, key, []byte("v"), fence.Token(g.Token))
		return err
	}
	mismatch := func(key string, g *fencedv1.Grant, required string) {
		t.Helper()
		err := put(key, g)
		var sm *fence.ScopeMismatchError
		want := fence.ScopeMismatchError{Object: key, Required: required, Presented: fence.Token(g.Token), Kind: fence.KindLock, Scope: g.Scope}
		if !errors.As(err, &sm) || *sm != want || connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Fatalf("put %q with %q's token: %v, want %+v (PermissionDenied)", key, g.Scope, err, want)
		}
		if e, err := c.KVGet(ctx, key); !errors.Is(err, client.ErrKeyNotFound) {
			t.Fatalf("refused put changed %q: %+v %v", key, e, err)
		}
	}
	mismatch("a", b, "a")                 // the holder of b writes a
	mismatch("ab", a, "ab")               // a string prefix is no scope
	mismatch("cache/x", cache, "billing") // the mapping moves cache/... to billing
	mismatch("cache/hot/1", billing, "hot")
	for key, g := range map[string]*fencedv1.Grant{"a": a, "a/1": a, "cache/x": billing, "cache": billing, "cache/hot/1": hot, "cache2": grant("cache2")} {
		if err := put(key, g); err != nil {
			t.Errorf("put %q with %q's token: %v", key, g.Scope, err)
		}
	}
}

// A bad --kv-scope mapping is refused by Validate, naming it.
func TestKVScope_ConfigValidate(t *testing.T) {
	for _, bad := range [][]server.KVScope{
		{{Prefix: "", Scope: "x"}},
		{{Prefix: "x", Scope: ""}},
		{{Prefix: "x", Scope: "a"}, {Prefix: "x", Scope: "b"}},
	} {
		cfg := server.DefaultConfig()
		cfg.KVScopes = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "kv scope") {
			t.Errorf("Validate(%+v) = %v, want a kv scope error", bad, err)
		}
	}
	for _, s := range []string{"noequals", "=x", "x="} {
		if _, err := server.ParseKVScope(s); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("ParseKVScope(%q) = %v, want invalid argument", s, err)
		}
	}
	if m, err := server.ParseKVScope("cache=orders/1"); err != nil || m != (server.KVScope{Prefix: "cache", Scope: "orders/1"}) {
		t.Errorf("ParseKVScope: %+v %v", m, err)
	}
}
