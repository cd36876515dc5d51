package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Fuzz targets of the server's HTTP surface, called through its handler
// in process (no connection). `go test` runs their seed corpora;
// scripts/fuzz.sh runs each under the fuzzing engine.

// fuzzCallTimeout bounds each fuzzed request, so an acquire that queues
// does not wait for its whole wait_ms.
const fuzzCallTimeout = 2 * time.Second

// serveFuzz runs req through h and returns the response; ctxDone reports
// that the request's own deadline ran out (a 504 is then the client's
// doing, not the server's).
func serveFuzz(h http.Handler, req *http.Request) (rec *httptest.ResponseRecorder, ctxDone bool) {
	ctx, cancel := context.WithTimeout(req.Context(), fuzzCallTimeout)
	defer cancel()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	return rec, ctx.Err() != nil
}

// serverFault reports a status that blames the server: any 5xx but 503
// (unavailable: not the leader, shutting down) and 504 after the caller's
// own deadline.
func serverFault(status int, ctxDone bool) bool {
	return status >= 500 && status != http.StatusServiceUnavailable && !(status == http.StatusGatewayTimeout && ctxDone)
}

// jsonProcedures are the JSON API calls FuzzJSONAPI sends bodies to. The
// membership changes (AddMember, RemoveMember, TransferLeader) are left
// out: a well-formed one really changes the cluster.
var jsonProcedures = []string{
	fencedv1connect.LockServiceAcquireProcedure,
	fencedv1connect.LockServiceReleaseProcedure,
	fencedv1connect.LockServiceVerifyProcedure,
	fencedv1connect.LockServiceDescribeProcedure,
	fencedv1connect.LockServiceListProcedure,
	fencedv1connect.LockServiceStatusProcedure,
	fencedv1connect.RWLockServiceAcquireProcedure,
	fencedv1connect.RWLockServiceReleaseProcedure,
	fencedv1connect.RWLockServiceVerifyProcedure,
	fencedv1connect.RWLockServiceDescribeProcedure,
	fencedv1connect.SessionServiceCreateSessionProcedure,
	fencedv1connect.SessionServiceKeepAliveOnceProcedure,
	fencedv1connect.SessionServiceCloseSessionProcedure,
	fencedv1connect.KVServicePutProcedure,
	fencedv1connect.KVServiceGetProcedure,
	fencedv1connect.KVServiceDeleteProcedure,
	fencedv1connect.ClusterServiceRegisterNodeProcedure,
	fencedv1connect.ClusterServiceStatusProcedure,
}

// FuzzJSONAPI posts arbitrary bodies as JSON to the API's procedures: the
// server never panics and never answers with a 5xx other than 503, and
// every error body is a JSON object with a code.
func FuzzJSONAPI(f *testing.F) {
	for i, body := range []string{
		`{"name":"a","ttlMs":"5000"}`,
		`{"name":"a","ttlMs":"288230376151711844"}`,
		`{"name":"a","ttlMs":"9223372036854775807","waitMs":"-9223372036854775808"}`,
		`{"name":"a\u202e","session":"1","seq":"1"}`,
		`{"name":"a","session":"18446744073709551615","seq":"18446744073709551615","waitMs":"100"}`,
		`{"ttlMs":"1000","requestId":"r"}`,
		`{"session":"1","nonce":"3","more":[{"session":"2"}]}`,
		`{"key":"k","value":"dg==","token":"1","ifVersion":"0","issuer":"x"}`,
		`{"id":"n1","apiAddr":"127.0.0.1:1"}`,
		`{"prefix":"","limit":-1}`,
		`{"name":7`,
		`[]`,
		`null`,
		``,
		"{\"name\":\"\xff\"}",
	} {
		f.Add(uint8(i), []byte(body))
	}
	srv := testserver.Start(f)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, proc uint8, body []byte) {
		path := jsonProcedures[int(proc)%len(jsonProcedures)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec, ctxDone := serveFuzz(h, req)
		if serverFault(rec.Code, ctxDone) {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK {
			var e struct{ Code string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" {
				t.Fatalf("POST %s %q: %d with a body that is not a JSON error: %q", path, body, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzKVHTTP sends arbitrary requests to /v1/kv/{key}: method, key,
// fencing headers (each split on '|' into repeated values), If-Match,
// Idempotency-Key and body. The server never panics, never answers with a
// 5xx other than 503, answers only with the statuses of the convention,
// and accepts a write only with exactly one X-Fencing-Token.
func FuzzKVHTTP(f *testing.F) {
	f.Add(uint8(0), "orders", "1", "", "", "", "", []byte("v"))
	f.Add(uint8(0), "orders", "1|1", "", "", "", "", []byte("v"))
	f.Add(uint8(0), "orders", "1", "a|b", "x|y", `"0"|"1"`, "k|k", []byte("v"))
	f.Add(uint8(1), "orders\u202e", "", "", "", "", "", []byte(nil))
	f.Add(uint8(2), "orders", "9223372036854775808", "", "", "W/x", "", []byte(nil))
	f.Add(uint8(3), "a/b/../c", "00001", "", "", `"18446744073709551616"`, strings.Repeat("i", 65), []byte("v"))
	f.Add(uint8(4), "%zz", "-1", "", "", "", "", []byte("v"))
	srv := testserver.Start(f)
	h := srv.Handler()
	methods := []string{http.MethodPut, http.MethodGet, http.MethodDelete, http.MethodHead, http.MethodPost, "PATCH"}
	f.Fuzz(func(t *testing.T, m uint8, key, token, issuer, resource, ifMatch, idem string, body []byte) {
		method := methods[int(m)%len(methods)]
		req, err := http.NewRequest(method, "/v1/kv/"+url.PathEscape(key), bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		for name, v := range map[string]string{"X-Fencing-Token": token, "X-Fencing-Issuer": issuer, "X-Resource-Id": resource, "If-Match": ifMatch, "Idempotency-Key": idem} {
			if v == "" {
				continue
			}
			for _, part := range strings.Split(v, "|") {
				req.Header.Add(name, part)
			}
		}
		rec, ctxDone := serveFuzz(h, req)
		if serverFault(rec.Code, ctxDone) {
			t.Fatalf("%s %q: %d %s", method, key, rec.Code, rec.Body)
		}
		switch rec.Code {
		case 200, 400, 403, 404, 405, 409, 412, 413, 503:
		default:
			t.Fatalf("%s %q: status %d is not one the kv answers", method, key, rec.Code)
		}
		write := method == http.MethodPut || method == http.MethodDelete
		if write && rec.Code == 200 && len(req.Header.Values("X-Fencing-Token")) != 1 {
			t.Fatalf("%s %q accepted with X-Fencing-Token %q", method, key, req.Header.Values("X-Fencing-Token"))
		}
		if rec.Code != 200 && method != http.MethodHead && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %q: %d with a body that is not JSON: %q", method, key, rec.Code, rec.Body)
		}
	})
}
