package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/httpfence"
)

func TestTransport_Headers(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))
	defer srv.Close()
	hc := fencedClient(srv)

	ctx := httpfence.WithIssuer(httpfence.WithToken(context.Background(), "orders/7", 42), "cluster-a")
	req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL, nil)
	req.Header.Set("X-Fencing-Token", "1") // replaced by the context's token
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]string{"X-Fencing-Token": "42", "X-Resource-Id": "orders/7", "X-Fencing-Issuer": "cluster-a"} {
		if vs := got.Values(k); len(vs) != 1 || vs[0] != want {
			t.Errorf("server got %s=%q, want [%q]", k, vs, want)
		}
	}
	if v := req.Header.Get("X-Fencing-Token"); v != "1" || req.Header.Get("X-Resource-Id") != "" {
		t.Errorf("the caller's request was modified: X-Fencing-Token=%q", v)
	}

	// WithToken again replaces the token and keeps the issuer; an empty
	// object sends no X-Resource-Id.
	ctx = httpfence.WithToken(ctx, "", 43)
	req, _ = http.NewRequestWithContext(ctx, "PUT", srv.URL, nil)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("X-Fencing-Token") != "43" || got.Get("X-Fencing-Issuer") != "cluster-a" || got.Values("X-Resource-Id") != nil {
		t.Errorf("second request headers %v, want token 43, issuer cluster-a, no X-Resource-Id", got)
	}

	// Without a token in the context the request goes out unchanged.
	req, _ = http.NewRequest("PUT", srv.URL, nil)
	req.Header.Set("X-Fencing-Token", "7")
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("X-Fencing-Token") != "7" || got.Values("X-Fencing-Issuer") != nil {
		t.Errorf("unfenced request headers %v, want the caller's X-Fencing-Token 7 only", got)
	}
}

// TestTransport_Errors checks the mapping of rejections, from this
// package's middleware and from a server that knows only docs/design.md §5.
func TestTransport_Errors(t *testing.T) {
	o := newObjects()
	fenced := newServer(t, o, setups[0], httpfence.Config{Issuer: "cluster-a"})
	if err := post(httpfence.WithIssuer(context.Background(), "cluster-a"), fencedClient(fenced), fenced.URL, "obj", 9, "v"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	// plain answers with a fixed status, headers and body.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for _, h := range q["h"] {
			k, v, _ := strings.Cut(h, ":")
			w.Header().Set(k, v)
		}
		switch q.Get("s") {
		case "409":
			w.WriteHeader(409)
		case "400":
			w.WriteHeader(400)
		case "403":
			w.WriteHeader(403)
		}
		io.WriteString(w, q.Get("b"))
	}))
	defer plain.Close()
	plainURL := func(status, body string, headers ...string) string {
		v := url.Values{"s": {status}, "b": {body}, "h": headers}
		return plain.URL + "/p?" + v.Encode()
	}

	send := func(t *testing.T, ctx context.Context, u string) (*http.Response, error) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader("v"))
		resp, err := (&http.Client{Transport: &httpfence.Transport{}}).Do(req)
		if err == nil {
			defer resp.Body.Close()
			io.ReadAll(resp.Body)
		}
		return resp, err
	}
	bg := context.Background()
	issuerA := httpfence.WithIssuer(bg, "cluster-a")

	t.Run("stale from the middleware", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(issuerA, "obj", 7), fenced.URL+"/objects")
		var se *fence.StaleTokenError
		if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("err=%v, want a *fence.StaleTokenError", err)
		}
		if *se != (fence.StaleTokenError{Object: "obj", Presented: 7, Required: 9}) {
			t.Fatalf("StaleTokenError=%+v, want {obj 7 9}", *se)
		}
		var ue *url.Error
		if !errors.As(err, &ue) {
			t.Fatalf("err=%T, want it wrapped in the *url.Error of http.Client", err)
		}
	})
	t.Run("stale from a plain §5 server", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(bg, "doc-1", 3),
			plainURL("409", `{"error":"stale","presented":"3","required":"12"}`, "X-Required-Token:12"))
		var se *fence.StaleTokenError
		if !errors.As(err, &se) || *se != (fence.StaleTokenError{Object: "doc-1", Presented: 3, Required: 12}) {
			t.Fatalf("err=%v, want StaleTokenError{doc-1 3 12}", err)
		}
	})
	t.Run("stale without object or body", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(bg, "", 3), plainURL("409", "", "X-Required-Token:12"))
		var se *fence.StaleTokenError
		if !errors.As(err, &se) || *se != (fence.StaleTokenError{Object: "/p", Presented: 3, Required: 12}) {
			t.Fatalf("err=%v, want StaleTokenError{/p 3 12}: object from the URL path, presented from the request", err)
		}
	})
	t.Run("stale marker without a required token", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(bg, "o", 3), plainURL("409", `{"error":"old"}`, "X-Fencing-Error:stale-token"))
		if !errors.Is(err, fence.ErrStaleToken) || !strings.Contains(err.Error(), "old") {
			t.Fatalf("err=%v, want ErrStaleToken with the server's message", err)
		}
	})
	t.Run("invalid token", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(issuerA, "obj", fence.MaxToken+1), fenced.URL+"/objects")
		if !errors.Is(err, fence.ErrInvalidToken) || !strings.Contains(err.Error(), "above the maximum") {
			t.Fatalf("err=%v, want ErrInvalidToken with the server's message", err)
		}
	})
	t.Run("missing token", func(t *testing.T) {
		_, err := send(t, bg, fenced.URL+"/objects")
		if !errors.Is(err, fence.ErrInvalidToken) || !strings.Contains(err.Error(), "missing X-Fencing-Token") {
			t.Fatalf("err=%v, want ErrInvalidToken for a missing token", err)
		}
	})
	t.Run("issuer mismatch", func(t *testing.T) {
		_, err := send(t, httpfence.WithIssuer(httpfence.WithToken(bg, "obj", 10), "cluster-b"), fenced.URL+"/objects")
		if !errors.Is(err, fence.ErrIssuerMismatch) || errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("err=%v, want ErrIssuerMismatch", err)
		}
	})
	t.Run("invalid resource", func(t *testing.T) {
		_, err := send(t, httpfence.WithToken(bg, "o", 1), plainURL("400", `{"error":"no object"}`, "X-Fencing-Error:invalid-resource"))
		if !errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrInvalidToken) {
			t.Fatalf("err=%v, want ErrInvalidArgument", err)
		}
	})
	for _, tc := range []struct {
		name, status string
		headers      []string
	}{
		{"unmarked 400 is the handler's", "400", nil},
		{"unmarked 403 is the handler's", "403", nil},
		{"409 without X-Required-Token is the handler's", "409", nil},
		{"400 marked stale is not a stale token", "400", []string{"X-Fencing-Error:stale-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := send(t, httpfence.WithToken(bg, "o", 1), plainURL(tc.status, `{"error":"bad body"}`, tc.headers...))
			if err != nil || resp.Status[:3] != tc.status {
				t.Fatalf("got %v, %v; want the %s response itself", resp, err, tc.status)
			}
		})
	}
}
