package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

// TestMiddleware_Responses checks status, headers and body of every answer
// of the convention, in each setup, with plain http.Client requests (no
// Transport) as a client of another language would send them.
func TestMiddleware_Responses(t *testing.T) {
	const maxTok = "9223372036854775807"
	type want struct {
		status int
		header map[string]string // "" means the header must be absent
		body   map[string]string // nil: body not checked (handler's)
	}
	rejection := func(status int, reason string, body map[string]string, extra map[string]string) want {
		h := map[string]string{"Content-Type": "application/json", "X-Fencing-Error": reason, "X-Required-Token": ""}
		for k, v := range extra {
			h[k] = v
		}
		return want{status, h, body}
	}
	cases := []struct {
		name    string
		method  string
		path    string
		headers [][2]string
		want    want
	}{
		{
			name: "accepted", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "9"}, {"X-Resource-Id", "obj"}},
			want:    want{status: 204, header: map[string]string{"X-Fencing-Error": ""}},
		},
		{
			name: "equal token accepted", method: "PUT", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "9"}, {"X-Resource-Id", "obj"}},
			want:    want{status: 204},
		},
		{
			name: "stale", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "7"}, {"X-Resource-Id", "obj"}},
			want: rejection(409, "stale-token", map[string]string{
				"error":     `fence: stale token 7 for "obj": the object has accepted token 9; a write needs a token of at least 9`,
				"presented": "7",
				"required":  "9",
			}, map[string]string{"X-Required-Token": "9", "X-Resource-Id": "obj"}),
		},
		{
			name: "missing token", method: "DELETE", path: "/objects",
			headers: [][2]string{{"X-Resource-Id", "obj"}},
			want: rejection(400, "invalid-token", map[string]string{
				"error": "fence: invalid token: missing X-Fencing-Token header; a DELETE here needs the fencing token of your grant, a decimal number from 1 to " + maxTok,
			}, nil),
		},
		{
			name: "malformed token", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "12abc"}, {"X-Resource-Id", "obj"}},
			want: rejection(400, "invalid-token", map[string]string{
				"error": `X-Fencing-Token: fence: invalid token: "12abc" is not a decimal number; want digits only, 1 to ` + maxTok,
			}, nil),
		},
		{
			name: "token 0", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "0"}, {"X-Resource-Id", "obj"}},
			want: rejection(400, "invalid-token", map[string]string{
				"error": "X-Fencing-Token: fence: invalid token: token 0 is never issued; want 1 to " + maxTok,
			}, nil),
		},
		{
			name: "token above MaxToken", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "9223372036854775808"}, {"X-Resource-Id", "obj"}},
			want: rejection(400, "invalid-token", map[string]string{
				"error": `X-Fencing-Token: fence: invalid token: "9223372036854775808" is above the maximum ` + maxTok,
			}, nil),
		},
		{
			name: "two tokens", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "9"}, {"X-Fencing-Token", "10"}, {"X-Resource-Id", "obj"}},
			want: rejection(400, "invalid-token", map[string]string{
				"error": "fence: invalid token: 2 X-Fencing-Token headers; send one",
			}, nil),
		},
		{
			name: "two objects", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "9"}, {"X-Resource-Id", "a"}, {"X-Resource-Id", "b"}},
			want: rejection(400, "invalid-resource", map[string]string{
				"error": "fence: invalid argument: 2 X-Resource-Id headers; send one, naming the object the write is for",
			}, nil),
		},
		{
			name: "object from the URL path", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "1"}},
			want:    want{status: 204},
		},
		{
			name: "URL path, equal token", method: "POST", path: "/objects",
			headers: [][2]string{{"X-Fencing-Token", "1"}},
			want:    want{status: 204},
		},
		{
			name: "GET not fenced", method: "GET", path: "/objects",
			want: want{status: 500, header: map[string]string{"X-Fencing-Error": ""}}, // the handler answers "not fenced"
		},
		{
			name: "HEAD not fenced", method: "HEAD", path: "/objects",
			want: want{status: 500, header: map[string]string{"X-Fencing-Error": ""}},
		},
		{
			name: "OPTIONS not fenced", method: "OPTIONS", path: "/objects",
			want: want{status: 500, header: map[string]string{"X-Fencing-Error": ""}},
		},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			o := newObjects()
			srv := newServer(t, o, s, httpfence.Config{})
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("v"))
					for _, h := range tc.headers {
						req.Header.Add(h[0], h[1])
					}
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != tc.want.status {
						t.Fatalf("status=%d, want %d (body %s)", resp.StatusCode, tc.want.status, body)
					}
					for k, v := range tc.want.header {
						if got := resp.Header.Get(k); got != v {
							t.Errorf("header %s=%q, want %q", k, got, v)
						}
					}
					if tc.want.body != nil {
						if got := decode(t, body); !reflect.DeepEqual(got, tc.want.body) {
							t.Errorf("body=%v\nwant %v", got, tc.want.body)
						}
					}
				})
			}
			if v, m := o.read("obj"); v != "v,v" || m != 9 {
				t.Errorf("obj=%q, watermark %d; want the two accepted writes and watermark 9", v, m)
			}
			if v, m := o.read("/objects"); v != "v,v" || m != 1 {
				t.Errorf("/objects=%q, watermark %d; want two writes and watermark 1", v, m)
			}
		})
	}
}

func TestMiddleware_Issuer(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			o := newObjects()
			srv := newServer(t, o, s, httpfence.Config{Issuer: "cluster-a"})
			for _, tc := range []struct {
				name    string
				issuers []string
				status  int
				err     string
			}{
				{"same issuer", []string{"cluster-a"}, 204, ""},
				{"other issuer", []string{"cluster-b"}, 403, `fence: token from another issuer: token issued by "cluster-b", this resource accepts only tokens of issuer "cluster-a"`},
				{"no issuer", nil, 403, `fence: token from another issuer: this resource accepts only tokens of issuer "cluster-a" and none was presented`},
				{"two issuers", []string{"cluster-a", "cluster-a"}, 400, "fence: invalid token: 2 X-Fencing-Issuer headers; send one"},
				{"two issuers, one wrong", []string{"cluster-a", "cluster-b"}, 400, "fence: invalid token: 2 X-Fencing-Issuer headers; send one"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					req, _ := http.NewRequest("POST", srv.URL+"/objects", strings.NewReader("v"))
					req.Header.Set("X-Fencing-Token", "5")
					for _, is := range tc.issuers {
						req.Header.Add("X-Fencing-Issuer", is)
					}
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != tc.status {
						t.Fatalf("status=%d, want %d (body %s)", resp.StatusCode, tc.status, body)
					}
					if tc.err == "" {
						return
					}
					if got, want := decode(t, body), map[string]string{"error": tc.err}; !reflect.DeepEqual(got, want) {
						t.Errorf("body=%v, want %v", got, want)
					}
					wantReason := "issuer-mismatch"
					if tc.status == 400 {
						wantReason = "invalid-token"
					}
					if got := resp.Header.Get("X-Fencing-Error"); got != wantReason {
						t.Errorf("X-Fencing-Error=%q, want %s", got, wantReason)
					}
				})
			}
			if _, m := o.read("/objects"); m != 5 {
				t.Errorf("watermark=%d, want 5 from the one accepted write", m)
			}
		})
	}
}

// TestMiddleware_IssuerInContext checks that the presented issuer reaches
// the handler (and a guard pinned on its own) through guard.IssuerFromContext.
func TestMiddleware_IssuerInContext(t *testing.T) {
	mw, err := httpfence.New(httpfence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, guard.IssuerFromContext(r.Context()))
	})))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, nil)
	req.Header.Set("X-Fencing-Token", "5")
	req.Header.Set("X-Fencing-Issuer", "cluster-x")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "cluster-x" {
		t.Fatalf("issuer in the handler's context=%q, want cluster-x", b)
	}
}

func TestMiddleware_FencedAndResolve(t *testing.T) {
	o := newObjects()
	srv := newServer(t, o, setups[0], httpfence.Config{
		Fenced: func(r *http.Request) bool { return r.Method == http.MethodPost },
		Resolve: func(r *http.Request) string {
			return r.URL.Query().Get("object")
		},
	})
	send := func(method, query string) (int, map[string]string) {
		req, _ := http.NewRequest(method, srv.URL+"/objects"+query, strings.NewReader("v"))
		req.Header.Set("X-Fencing-Token", "3")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") != "application/json" {
			return resp.StatusCode, nil
		}
		return resp.StatusCode, decode(t, b)
	}
	if st, _ := send("POST", "?object=o1"); st != 204 {
		t.Fatalf("POST with a resolved object: status %d, want 204", st)
	}
	if _, m := o.read("o1"); m != 3 {
		t.Fatalf("watermark of the resolved object=%d, want 3", m)
	}
	st, body := send("POST", "")
	want := map[string]string{"error": "fence: invalid argument: no X-Resource-Id header and no object could be derived from the request; send X-Resource-Id naming the object the write is for"}
	if st != 400 || !reflect.DeepEqual(body, want) {
		t.Fatalf("POST without an object: %d %v, want 400 %v", st, body, want)
	}
	if st, _ := send("PUT", "?object=o1"); st != 500 {
		t.Fatalf("PUT (not fenced by this Config): status %d, want the handler's 500 for an unfenced request", st)
	}
}

// TestMiddleware_AroundHandlerResponses checks that the handler's own
// response passes through in AroundHandler mode and that only a 2xx
// raises the watermark.
func TestMiddleware_AroundHandlerResponses(t *testing.T) {
	var marks guard.Memory
	mw, err := httpfence.New(httpfence.Config{Guard: &marks, Mode: guard.AroundHandler})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "yes")
		switch r.URL.Path {
		case "/fail":
			http.Error(w, "disk full", http.StatusInternalServerError)
		case "/created":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "made")
		default:
			io.WriteString(w, "implicit 200")
		}
	})))
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		token  string
		status int
		body   string
		mark   fence.Token
	}{
		{"/fail", "5", 500, "disk full\n", 0},
		{"/created", "6", 201, "made", 6},
		{"/created", "6", 201, "made", 6},
		{"/fail", "8", 500, "disk full\n", 6},
		{"/ok", "9", 200, "implicit 200", 9},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tc.path, nil)
		req.Header.Set("X-Fencing-Token", tc.token)
		req.Header.Set("X-Resource-Id", "obj")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || string(b) != tc.body || resp.Header.Get("X-Handler") != "yes" {
			t.Errorf("%s token %s: %d %q (X-Handler %q), want %d %q from the handler", tc.path, tc.token, resp.StatusCode, b, resp.Header.Get("X-Handler"), tc.status, tc.body)
		}
		if got := marks.Watermark("obj"); got != tc.mark {
			t.Errorf("%s token %s: Watermark()=%d, want %d", tc.path, tc.token, got, tc.mark)
		}
	}
}

// TestMiddleware_AroundHandlerGuardFails checks that a 2xx of the handler
// is not sent when the guard's step fails after it.
func TestMiddleware_AroundHandlerGuardFails(t *testing.T) {
	g := fence.GuardFunc(func(ctx context.Context, object string, tok fence.Token, apply func(context.Context) error) error {
		if err := apply(ctx); err != nil {
			return err
		}
		return errors.New("commit: connection reset")
	})
	mw, err := httpfence.New(httpfence.Config{Guard: g, Mode: guard.AroundHandler})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "done")
	})))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, nil)
	req.Header.Set("X-Fencing-Token", "5")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := map[string]string{"error": "httpfence: the fencing guard failed; the write was not applied or its outcome is unknown"}
	if got := decode(t, b); resp.StatusCode != 500 || !reflect.DeepEqual(got, want) {
		t.Fatalf("%d %v, want 500 %v", resp.StatusCode, got, want)
	}
}

// TestMiddleware_AroundHandlerSerializes sends concurrent writes to one
// object through a handler that does an unprotected read-modify-write. In
// AroundHandler mode the middleware's critical section must keep them
// apart: no two handlers overlap, no update is lost, and the race detector
// sees the counter only under the guard's lock.
func TestMiddleware_AroundHandlerSerializes(t *testing.T) {
	var marks guard.Memory
	mw, err := httpfence.New(httpfence.Config{Guard: &marks, Mode: guard.AroundHandler})
	if err != nil {
		t.Fatal(err)
	}
	var inflight, overlaps atomic.Int32
	counter := 0 // deliberately unsynchronized: the middleware is the lock
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inflight.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inflight.Add(-1)
		v := counter
		time.Sleep(200 * time.Microsecond) // widen the window between read and write
		counter = v + 1
	})))
	defer srv.Close()
	hc := fencedClient(srv)

	const requests = 64
	var accepted, stale atomic.Int32
	var wg sync.WaitGroup
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := fence.Token(1 + i%8)
			err := post(context.Background(), hc, srv.URL, "obj", tok, "")
			var se *fence.StaleTokenError
			switch {
			case err == nil:
				accepted.Add(1)
			case errors.As(err, &se):
				stale.Add(1)
			default:
				t.Errorf("token %d: %v", tok, err)
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d handlers ran while another held the same object", n)
	}
	marks.Check(context.Background(), "sync", 1) // a happens-before edge for reading counter
	if got := int32(counter); got != accepted.Load() {
		t.Errorf("counter=%d, want %d (one per accepted write, none lost)", got, accepted.Load())
	}
	if accepted.Load()+stale.Load() != requests {
		t.Errorf("accepted %d + stale %d != %d requests", accepted.Load(), stale.Load(), requests)
	}
	if got := marks.Watermark("obj"); got != 8 {
		t.Errorf("Watermark()=%d, want 8", got)
	}
}

// TestMiddleware_NoGuard checks that guard.Do behind a middleware without
// a Guard reports guard.ErrNoGuard.
func TestMiddleware_NoGuard(t *testing.T) {
	mw, err := httpfence.New(httpfence.Config{}) // no Guard
	if err != nil {
		t.Fatal(err)
	}
	var got error
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = guard.Do(r.Context(), func(context.Context) error { return nil })
	}))
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("X-Fencing-Token", "1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !errors.Is(got, guard.ErrNoGuard) {
		t.Errorf("guard.Do without a Guard=%v, want guard.ErrNoGuard", got)
	}
}

// TestMiddleware_DoApplyErrorKeepsWatermark checks that guard.Do behind
// the middleware returns apply's error unchanged and keeps the watermark.
func TestMiddleware_DoApplyErrorKeepsWatermark(t *testing.T) {
	var marks guard.Memory
	mw, _ := httpfence.New(httpfence.Config{Guard: &marks})
	errDisk := errors.New("disk full")
	var got error
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = guard.Do(r.Context(), func(context.Context) error { return errDisk })
	}))
	req := httptest.NewRequest("POST", "/x", nil)
	req.Header.Set("X-Fencing-Token", "4")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got != errDisk {
		t.Errorf("guard.Do=%v, want apply's error unchanged", got)
	}
	if m := marks.Watermark("/x"); m != 0 {
		t.Errorf("Watermark()=%d after a failed apply, want 0", m)
	}
}

func TestConfig_Validate(t *testing.T) {
	if _, err := httpfence.New(httpfence.Config{Mode: guard.AroundHandler}); err == nil {
		t.Error("New(AroundHandler without a Guard) succeeded, want an error")
	}
	if _, err := httpfence.New(httpfence.Config{Mode: 7}); err == nil {
		t.Error("New(unknown mode) succeeded, want an error")
	}
	if err := (httpfence.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: Validate()=%v, want nil", err)
	}
}

func TestWriteError_NotFencing(t *testing.T) {
	rec := httptest.NewRecorder()
	if httpfence.WriteError(rec, errors.New("other")) || httpfence.WriteError(rec, nil) {
		t.Fatal("WriteError handled an error that is not a fencing error")
	}
	if rec.Code != 200 || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Fatalf("WriteError wrote %d %q %v for a non-fencing error", rec.Code, rec.Body, rec.Header())
	}
}
