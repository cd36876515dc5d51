// Package httpfencetest serves a resource behind the httpfence middleware
// with its real fence.Guard and checks the HTTP convention end to end: a
// fresh write is applied, a stale one is answered 409 with X-Required-Token
// and the JSON error body and writes nothing, in both modes of the
// middleware. Every guard of this module runs it against its real store:
//
//	func TestGuard_HTTP(t *testing.T) {
//		httpfencetest.Run(t, httpfencetest.Resource{
//			Guard: g,
//			Write: func(ctx context.Context, object string, t fence.Token, value string) error {
//				tx, _ := postgres.TxFromContext(ctx)
//				_, err := tx.Exec(ctx, "INSERT INTO docs ...", object, value)
//				return err
//			},
//			Read: func(ctx context.Context, object string) (string, error) { ... },
//		})
//	}
package httpfencetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

// Resource is a store protected by a guard, as Run drives it.
type Resource struct {
	// Guard is the guard under test: the middleware's Config.Guard.
	Guard fence.Guard
	// Write stores value as object's value, presented with token t. Run
	// calls it from the handler of a fenced request, inside Guard's atomic
	// step, with the context Guard gave apply (its transaction, queue or
	// lock are in it).
	Write func(ctx context.Context, object string, t fence.Token, value string) error
	// Read returns object's value, "" when it has none, from the store
	// itself, not through Guard.
	Read func(ctx context.Context, object string) (string, error)
}

// Run serves r behind the middleware in InHandler mode (the handler calls
// guard.Do) and in AroundHandler mode (the middleware runs the handler
// inside Guard.Do) and, in each, writes one new object through real HTTP:
//
//   - token 7: 204, and the store holds the value;
//   - token 6: 409 with X-Required-Token: 7, X-Fencing-Error: stale-token
//     and the body {"error", "presented": "6", "required": "7"}, and the
//     store still holds the first value;
//   - token 7 again: 204 (an equal token is accepted), the value replaced;
//   - token 0: 400, the value unchanged.
//
// Object names are letters, digits and "-", valid for every guard.
func Run(t *testing.T, r Resource) {
	for _, mode := range []guard.Mode{guard.InHandler, guard.AroundHandler} {
		t.Run(mode.String(), func(t *testing.T) { run(t, r, mode) })
	}
}

var objectSeq atomic.Int64

func run(t *testing.T, r Resource, mode guard.Mode) {
	mw, err := httpfence.New(httpfence.Config{Guard: r.Guard, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(handler(r, mode)))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	object := fmt.Sprintf("httpfencetest-%d-%d", time.Now().UnixNano(), objectSeq.Add(1))

	put := func(tok, value string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/objects/"+object, strings.NewReader(value))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(httpfence.HeaderToken, tok)
		req.Header.Set(httpfence.HeaderResourceID, object)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	stored := func(want, after string) {
		t.Helper()
		got, err := r.Read(ctx, object)
		if err != nil {
			t.Fatalf("read the store after %s: %v", after, err)
		}
		if got != want {
			t.Fatalf("after %s the store holds %q, want %q", after, got, want)
		}
	}

	if resp := put("7", "fresh"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("fresh write with token 7: %s %s, want 204", resp.Status, body(resp))
	}
	stored("fresh", "the fresh write")

	resp := put("6", "stale")
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale write with token 6: %s %s, want 409", resp.Status, body(resp))
	}
	for h, want := range map[string]string{
		httpfence.HeaderRequiredToken: "7",
		httpfence.HeaderError:         httpfence.ReasonStaleToken,
		httpfence.HeaderResourceID:    object,
		"Content-Type":                "application/json",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("409 header %s=%q, want %q", h, got, want)
		}
	}
	var eb struct{ Error, Presented, Required string }
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatalf("409 body is not the JSON error: %v", err)
	}
	if eb.Error == "" || eb.Presented != "6" || eb.Required != "7" {
		t.Errorf("409 body=%+v, want an error with presented 6 and required 7", eb)
	}
	stored("fresh", "the stale write")

	if resp := put("7", "again"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write with the equal token 7: %s %s, want 204", resp.Status, body(resp))
	}
	stored("again", "the write with the equal token")

	if resp := put("0", "invalid"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("write with token 0: %s %s, want 400", resp.Status, body(resp))
	}
	stored("again", "the write with token 0")
}

// handler writes the request's body through r.Write, inside guard.Do in
// InHandler mode and directly (the middleware's step is around it) in
// AroundHandler mode.
func handler(r Resource, mode guard.Mode) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		object, tok, _ := guard.TokenFrom(req.Context())
		write := func(ctx context.Context) error { return r.Write(ctx, object, tok, string(b)) }
		if mode == guard.InHandler {
			err = guard.Do(req.Context(), write)
		} else {
			err = write(req.Context())
		}
		if err != nil {
			if !httpfence.WriteError(w, err) {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// body returns the rest of a response's body, for failure messages.
func body(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}
