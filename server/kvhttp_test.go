package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

type httpResult struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func kvDo(t *testing.T, method, url string, header map[string]string, body []byte) httpResult {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := httpResult{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	json.Unmarshal(raw, &r.body)
	return r
}

// The kv over HTTP follows the convention of docs/design.md §5.
func TestKVHTTP_Convention(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	grant := func(name string, ttlMs int64) string {
		resp, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: name, TtlMs: ttlMs}))
		if err != nil || !resp.Msg.Granted {
			t.Fatalf("acquire: %v %v", resp, err)
		}
		return strings.TrimSpace(jsonNumber(resp.Msg.Grant.Token))
	}
	// The lock "orders" guards the key "orders" (the kv scope rule).
	low := grant("orders", 100)
	waitFor(t, "first grant expired", func() bool { return a.describe(t, "orders").Holder == nil })
	high := grant("orders", 60000)
	url := "http://" + a.addr + "/v1/kv/orders"

	// A token of another lock, above the watermark: 403 naming its scope.
	other := grant("billing", 60000)
	r := kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": other}, []byte("x"))
	if r.status != http.StatusForbidden || r.header.Get("X-Fencing-Error") != "scope-mismatch" ||
		r.header.Get("X-Token-Kind") != "lock" || r.header.Get("X-Token-Scope") != "billing" || r.header.Get("X-Required-Scope") != "orders" ||
		r.body["scope"] != "billing" || r.body["kind"] != "lock" || r.body["error"] == nil {
		t.Fatalf("PUT with another lock's token: %d %v %s, want 403 scope-mismatch naming billing", r.status, r.header, r.raw)
	}
	// The expired holder's token, at the (empty) key's watermark: 403, no
	// live grant (no X-Token-Scope).
	r = kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": low}, []byte("x"))
	if r.status != http.StatusForbidden || r.header.Get("X-Fencing-Error") != "scope-mismatch" || r.header.Get("X-Token-Scope") != "" ||
		!strings.Contains(fmt.Sprint(r.body["error"]), "no live grant") {
		t.Fatalf("PUT with an expired holder's token: %d %v %s, want 403 scope-mismatch, no live grant", r.status, r.header, r.raw)
	}
	if g := kvDo(t, http.MethodGet, url, nil, nil); g.status != http.StatusNotFound || g.header.Get("X-Fencing-Token") != "" {
		t.Fatalf("refused writes changed the key: GET %d %v %s", g.status, g.header, g.raw)
	}

	r = kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": high}, []byte("v1"))
	if r.status != 200 || r.header.Get("ETag") != `"1"` || r.body["token"] != high {
		t.Fatalf("PUT: %d %v %s", r.status, r.header, r.raw)
	}
	r = kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": low}, []byte("stale"))
	if r.status != http.StatusConflict || r.header.Get("X-Required-Token") != high ||
		r.body["presented"] != low || r.body["required"] != high || r.body["error"] == nil {
		t.Fatalf("stale PUT: %d %v %s, want 409 with X-Required-Token %s", r.status, r.header, r.raw, high)
	}
	for name, h := range map[string]map[string]string{
		"missing token": {},
		"invalid token": {"X-Fencing-Token": "abc"},
		"zero token":    {"X-Fencing-Token": "0"},
		"too big":       {"X-Fencing-Token": "9223372036854775808"},
		"bad If-Match":  {"X-Fencing-Token": high, "If-Match": "W/x"},
		"never issued":  {"X-Fencing-Token": "999999"},
	} {
		r := kvDo(t, http.MethodPut, url, h, []byte("bad"))
		if r.status != http.StatusBadRequest || r.body["error"] == nil {
			t.Errorf("%s: %d %s, want 400 with a JSON error", name, r.status, r.raw)
		}
	}
	r = kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": high, "If-Match": `"7"`}, []byte("v2"))
	if r.status != http.StatusPreconditionFailed || r.header.Get("X-Current-Version") != "1" {
		t.Fatalf("PUT with a wrong If-Match: %d %s", r.status, r.raw)
	}
	r = kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": high}, make([]byte, 1<<20+1))
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("PUT over 1 MiB: %d %s", r.status, r.raw)
	}
	r = kvDo(t, http.MethodGet, url, nil, nil)
	if r.status != 200 || r.raw != "v1" || r.header.Get("ETag") != `"1"` || r.header.Get("X-Fencing-Token") != high {
		t.Fatalf("GET: %d %v %q", r.status, r.header, r.raw)
	}
	r = kvDo(t, http.MethodDelete, url, map[string]string{"X-Fencing-Token": high, "If-Match": `"1"`}, nil)
	if r.status != 200 || r.body["deleted"] != true {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
	if r := kvDo(t, http.MethodGet, url, nil, nil); r.status != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %d %s", r.status, r.raw)
	}
	if r := kvDo(t, http.MethodPut, url, map[string]string{"X-Fencing-Token": low}, []byte("zombie")); r.status != http.StatusConflict {
		t.Fatalf("stale PUT after DELETE: %d %s, want 409 (the watermark survives the delete)", r.status, r.raw)
	}
}

func jsonNumber(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The kv's fencing rejections carry X-Fencing-Error (httpfence.WriteError),
// so httpfence.Transport turns them into fence errors; its other answers
// stay responses.
func TestKVHTTP_Transport(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	lock := "orders" // guards the key "orders"
	grant := func(ttlMs int64) fence.Token {
		resp, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: lock, TtlMs: ttlMs}))
		if err != nil || !resp.Msg.Granted {
			t.Fatalf("acquire: %v %v", resp, err)
		}
		return fence.Token(resp.Msg.Grant.Token)
	}
	low := grant(100)
	waitFor(t, "first grant expired", func() bool { return a.describe(t, lock).Holder == nil })
	high := grant(60000)
	hc := &http.Client{Transport: &httpfence.Transport{}}
	url := "http://" + a.addr + "/v1/kv/orders"
	put := func(ctx context.Context, ifMatch string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader("v"))
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	if st, err := put(httpfence.WithToken(ctx, "orders", high), ""); err != nil || st != http.StatusOK {
		t.Fatalf("PUT: %d, %v; want 200", st, err)
	}
	_, err := put(httpfence.WithToken(ctx, "orders", low), "")
	var se *fence.StaleTokenError
	if !errors.As(err, &se) || *se != (fence.StaleTokenError{Object: "orders", Presented: low, Required: high}) {
		t.Errorf("stale PUT: %v, want StaleTokenError{orders %d %d}", err, low, high)
	}
	if _, err := put(httpfence.WithToken(ctx, "orders", high+1000), ""); !errors.Is(err, fence.ErrInvalidToken) {
		t.Errorf("PUT with a token never issued: %v, want fence.ErrInvalidToken", err)
	}
	if _, err := put(httpfence.WithIssuer(httpfence.WithToken(ctx, "orders", high), "another-cluster"), ""); !errors.Is(err, fence.ErrIssuerMismatch) {
		t.Errorf("PUT with a token of another issuer: %v, want fence.ErrIssuerMismatch", err)
	}
	if st, err := put(httpfence.WithToken(ctx, "orders", high), `"7"`); err != nil || st != http.StatusPreconditionFailed {
		t.Errorf("PUT with a wrong If-Match: %d, %v; want the 412 response", st, err)
	}
	if st, err := put(httpfence.WithToken(ctx, "orders", high), "W/x"); err != nil || st != http.StatusBadRequest {
		t.Errorf("PUT with a malformed If-Match: %d, %v; want the 400 response, not a fencing error", st, err)
	}
}

// A write that repeats a fencing header (or If-Match, Idempotency-Key) is
// refused with 400 and a JSON error, and changes nothing: the kv used to
// take the first X-Fencing-Token and ignore the others.
func TestKVHTTP_RepeatedHeaders(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	resp, err := a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "lock-" + t.Name(), TtlMs: 30000}))
	if err != nil || !resp.Msg.Granted {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	tok := fence.Token(resp.Msg.Grant.Token).String()
	url := "http://" + a.addr + "/v1/kv/lock-" + t.Name() // the lock's own key
	put := func(header http.Header) httpResult {
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("v"))
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := httpResult{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
		json.Unmarshal(raw, &r.body)
		return r
	}
	for _, tt := range []struct {
		name   string
		header http.Header
		reason string // X-Fencing-Error
		msg    string
	}{
		{"two tokens", http.Header{"X-Fencing-Token": {tok, "1"}}, "invalid-token", "2 X-Fencing-Token headers; send one"},
		{"two equal tokens", http.Header{"X-Fencing-Token": {tok, tok}}, "invalid-token", "2 X-Fencing-Token headers"},
		{"two issuers", http.Header{"X-Fencing-Token": {tok}, "X-Fencing-Issuer": {"a", "b"}}, "invalid-token", "2 X-Fencing-Issuer headers"},
		{"two resource ids", http.Header{"X-Fencing-Token": {tok}, "X-Resource-Id": {"a", "b"}}, "", "2 X-Resource-Id headers"},
		{"two If-Match", http.Header{"X-Fencing-Token": {tok}, "If-Match": {`"0"`, `"1"`}}, "", "2 If-Match headers"},
		{"two idempotency keys", http.Header{"X-Fencing-Token": {tok}, "Idempotency-Key": {"a", "b"}}, "", "2 Idempotency-Key headers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := put(tt.header)
			msg, _ := r.body["error"].(string)
			if r.status != http.StatusBadRequest || !strings.Contains(msg, tt.msg) {
				t.Fatalf("%d %s, want 400 with a JSON error mentioning %q", r.status, r.raw, tt.msg)
			}
			if got := r.header.Get("X-Fencing-Error"); got != tt.reason {
				t.Errorf("X-Fencing-Error=%q, want %q", got, tt.reason)
			}
			if g := kvDo(t, http.MethodGet, url, nil, nil); g.status != http.StatusNotFound {
				t.Fatalf("the refused write changed the key: GET %d %s", g.status, g.raw)
			}
		})
	}
	if r := put(http.Header{"X-Fencing-Token": {tok}}); r.status != http.StatusOK {
		t.Fatalf("PUT with one token: %d %s", r.status, r.raw)
	}
}

// A key whose URL path is not canonical ("a/../b") is refused with 400:
// the mux used to redirect the write to the cleaned path, another key,
// with its token (found by FuzzKVHTTP as a 307 for the key ".").
func TestKVHTTP_NonCanonicalPathRefused(t *testing.T) {
	a := newAPI(t)
	resp, err := a.locks.Acquire(context.Background(), connect.NewRequest(&fencedv1.AcquireRequest{Name: "lock-" + t.Name(), TtlMs: 30000}))
	if err != nil || !resp.Msg.Granted {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	tok := fence.Token(resp.Msg.Grant.Token).String()
	for _, key := range []string{"a/../b", ".", "a/./b", "a//b", "x/.."} {
		r := kvDo(t, http.MethodPut, "http://"+a.addr+"/v1/kv/"+key, map[string]string{"X-Fencing-Token": tok}, []byte("v"))
		msg, _ := r.body["error"].(string)
		if r.status != http.StatusBadRequest || !strings.Contains(msg, "cannot be sent in a URL path") {
			t.Errorf("PUT /v1/kv/%s: %d %s, want 400", key, r.status, r.raw)
		}
	}
	for _, key := range []string{"b", "a/b", "a"} {
		if r := kvDo(t, http.MethodGet, "http://"+a.addr+"/v1/kv/"+key, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("GET /v1/kv/%s after the refused writes: %d %s, want 404", key, r.status, r.raw)
		}
	}
}
