package httpfence_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

// FuzzMiddleware sends requests with arbitrary fencing headers (each
// '|'-separated field becomes repeated header values) through the
// middleware in AroundHandler mode over a guard.Memory pinned to an
// issuer. It never panics; it answers only 204 (the handler ran), 400,
// 403 or 409, every rejection a JSON body with X-Fencing-Error; the
// handler runs only for a request with exactly one valid token, at most
// one object and exactly the pinned issuer, and the watermark never goes
// down.
func FuzzMiddleware(f *testing.F) {
	f.Add("5", "obj", "cluster-a")
	f.Add("5|6", "obj", "cluster-a")
	f.Add("5", "a|b", "cluster-a")
	f.Add("5", "obj", "cluster-a|cluster-a")
	f.Add("5", "", "")
	f.Add("", "obj", "cluster-b")
	f.Add("0", "|", "|")
	f.Add("3", "obj", "cluster-a")
	mem := &guard.Memory{}
	mw, err := httpfence.New(httpfence.Config{Guard: mem, Mode: guard.AroundHandler, Issuer: "cluster-a"})
	if err != nil {
		f.Fatal(err)
	}
	ran := false
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		w.WriteHeader(http.StatusNoContent)
	}))
	f.Fuzz(func(t *testing.T, token, object, issuer string) {
		req := httptest.NewRequest(http.MethodPost, "/objects", strings.NewReader("v"))
		for name, v := range map[string]string{httpfence.HeaderToken: token, httpfence.HeaderResourceID: object, httpfence.HeaderIssuer: issuer} {
			if v == "" {
				continue
			}
			for _, part := range strings.Split(v, "|") {
				req.Header.Add(name, part)
			}
		}
		vals := func(name string) []string { return req.Header.Values(name) }
		objectSent := "/objects"
		if o := vals(httpfence.HeaderResourceID); len(o) == 1 && o[0] != "" {
			objectSent = o[0]
		}
		before := mem.Watermark(objectSent)
		ran = false
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusNoContent:
			tok, err := fence.ParseToken(token)
			switch {
			case !ran:
				t.Fatal("204 without running the handler")
			case len(vals(httpfence.HeaderToken)) != 1 || err != nil:
				t.Fatalf("handler ran with X-Fencing-Token %q", vals(httpfence.HeaderToken))
			case len(vals(httpfence.HeaderResourceID)) > 1:
				t.Fatalf("handler ran with X-Resource-Id %q", vals(httpfence.HeaderResourceID))
			case len(vals(httpfence.HeaderIssuer)) != 1 || vals(httpfence.HeaderIssuer)[0] != "cluster-a":
				t.Fatalf("handler ran with X-Fencing-Issuer %q", vals(httpfence.HeaderIssuer))
			case tok < before:
				t.Fatalf("handler ran with token %d below the watermark %d", tok, before)
			}
		case http.StatusBadRequest, http.StatusForbidden, http.StatusConflict:
			if ran {
				t.Fatalf("status %d after the handler ran", rec.Code)
			}
			if rec.Header().Get(httpfence.HeaderError) == "" || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("rejection %d without X-Fencing-Error or a JSON body: %v %q", rec.Code, rec.Header(), rec.Body)
			}
		default:
			t.Fatalf("status %d: %q", rec.Code, rec.Body)
		}
		if after := mem.Watermark(objectSent); after < before {
			t.Fatalf("watermark of %q went down from %d to %d", objectSent, before, after)
		}
	})
}
