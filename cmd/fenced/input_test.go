package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// The input findings of issue 11, against a real `fenced serve` process
// over its JSON API and /v1/kv: a TTL of 2^58+100 ms was taken as 100 ms
// while the reply claimed millions of years; the maximum int64 was refused
// as "ttl -1ms"; a repeated X-Fencing-Token was served with the first
// value; names with bidirectional controls or zero-width characters were
// accepted; RegisterNode took any id and address. Each is now refused with
// 400 and a message that says what is allowed, and changes nothing.
func TestServe_InputHygiene(t *testing.T) {
	srv := proctest.StartServer(t)
	base := "http://" + srv.Addr
	call := func(method, path string, header http.Header, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if header != nil {
			req.Header = header
		}
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	refused := func(what string, status int, body, want string) {
		t.Helper()
		if status != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s, want 400 mentioning %q", what, status, body, want)
		}
	}

	st, body := call("POST", "/fenced.v1.SessionService/CreateSession", nil, `{"ttlMs":"288230376151711844"}`)
	refused("session ttl 2^58+100 ms", st, body, "ttl must be between 100ms and 24h, got 288230376151711844ms")
	st, body = call("POST", "/fenced.v1.SessionService/CreateSession", nil, `{"ttlMs":"9223372036854775807"}`)
	refused("session ttl of the maximum int64", st, body, "got 9223372036854775807ms")
	st, body = call("POST", "/fenced.v1.LockService/Acquire", nil, `{"name":"x","ttlMs":"288230376151711844"}`)
	refused("per-grant ttl 2^58+100 ms", st, body, "got 288230376151711844ms")
	st, body = call("POST", "/fenced.v1.LockService/Acquire", nil, `{"name":"orders\u202egpj.exe","ttlMs":"30000"}`)
	refused("a name with U+202E", st, body, "U+202E at byte 6")
	st, body = call("POST", "/fenced.v1.LockService/Acquire", nil, `{"name":"ord\u200bers","ttlMs":"30000"}`)
	refused("a name with U+200B", st, body, "U+200B at byte 3")
	st, body = call("POST", "/fenced.v1.ClusterService/RegisterNode", nil, `{"id":"n1","apiAddr":"evil.example/x"}`)
	refused("RegisterNode with an address that is not HOST:PORT", st, body, "is not HOST:PORT")

	// Nothing of the above left a session, a lock or a registration behind.
	st, body = call("POST", "/fenced.v1.LockService/Status", nil, `{}`)
	var status struct {
		LastToken string
		Sessions  []any
		Locks     []any
	}
	if err := json.Unmarshal([]byte(body), &status); st != 200 || err != nil {
		t.Fatalf("Status: %d %s", st, body)
	}
	if len(status.Sessions) != 0 || len(status.Locks) != 0 || status.LastToken != "" {
		t.Fatalf("refused requests left state behind: %s", body)
	}

	st, body = call("POST", "/fenced.v1.LockService/Acquire", nil, `{"name":"orders","ttlMs":"30000"}`)
	var acq struct{ Grant struct{ Token string } }
	if err := json.Unmarshal([]byte(body), &acq); st != 200 || err != nil || acq.Grant.Token == "" {
		t.Fatalf("acquire: %d %s", st, body)
	}
	st, body = call("PUT", "/v1/kv/orders", http.Header{"X-Fencing-Token": {acq.Grant.Token, "1"}}, "v")
	refused("a kv write with two X-Fencing-Token headers", st, body, "2 X-Fencing-Token headers; send one")
	if st, body := call("GET", "/v1/kv/orders", nil, ""); st != http.StatusNotFound {
		t.Fatalf("the refused kv write was applied: GET %d %s", st, body)
	}
	if st, body := call("PUT", "/v1/kv/orders", http.Header{"X-Fencing-Token": {acq.Grant.Token}}, "v"); st != 200 {
		t.Fatalf("kv write with one token: %d %s", st, body)
	}
}
