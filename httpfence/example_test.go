package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

// The handler makes its write through guard.Do, so the token check, the
// write and the raise of the watermark are one step; the client's Transport
// sends the token and turns a 409 into a *fence.StaleTokenError.
func Example() {
	var (
		marks guard.Memory
		mu    sync.Mutex
		docs  = map[string]string{}
	)
	mw, err := httpfence.New(httpfence.Config{Guard: &marks})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /docs/{id}", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := guard.Do(r.Context(), func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			docs[r.PathValue("id")] = string(body)
			return nil
		})
		if err != nil {
			if !httpfence.WriteError(w, err) {
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	hc := &http.Client{Transport: &httpfence.Transport{}}
	put := func(t fence.Token, text string) error {
		ctx := httpfence.WithToken(context.Background(), "docs/readme", t)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/docs/readme", strings.NewReader(text))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Println(t, resp.Status)
		return nil
	}

	put(34, "written by the current holder")
	err = put(33, "written by a holder that paused past its lease")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("rejected: presented %d, required %d\n", stale.Presented, stale.Required)
	}
	mu.Lock()
	fmt.Println(docs["readme"])
	mu.Unlock()
	// Output:
	// 34 204 No Content
	// rejected: presented 33, required 34
	// written by the current holder
}

// In AroundHandler mode the middleware holds the object for the whole
// handler and raises the watermark only when the handler answers 2xx, so a
// handler needs no changes. It protects a resource that only this process
// writes.
func ExampleNew_aroundHandler() {
	var marks guard.Memory
	mw, err := httpfence.New(httpfence.Config{
		Guard: &marks,
		Mode:  guard.AroundHandler,
	})
	if err != nil {
		panic(err)
	}
	counter := 0
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counter++ // runs only after the token was accepted, and one request at a time
		fmt.Fprintln(w, counter)
	})))
	defer srv.Close()

	for _, t := range []string{"7", "7", "6"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/counter", nil)
		req.Header.Set(httpfence.HeaderToken, t)
		resp, err := srv.Client().Do(req) // a plain client, as from any language
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("token %s: %d %s %s", t, resp.StatusCode, resp.Header.Get(httpfence.HeaderRequiredToken), body)
	}
	fmt.Println("watermark of /counter:", marks.Watermark("/counter"))
	// Output:
	// token 7: 200  1
	// token 7: 200  2
	// token 6: 409 7 {"error":"fence: stale token 6 for \"/counter\": the object has accepted token 7; a write needs a token of at least 7","presented":"6","required":"7"}
	// watermark of /counter: 7
}

// A handler that writes through a guard of its own, not the middleware's,
// takes the object and token from guard.TokenFrom and hands both to it;
// here a guard.Memory stands in for a PostgreSQL or Redis guard.
func ExampleMiddleware_Handler_ownGuard() {
	var g guard.Memory
	mw, _ := httpfence.New(httpfence.Config{}) // no Guard: the handler uses its own guard
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		object, t, _ := guard.TokenFrom(r.Context())
		err := g.Do(r.Context(), object, t, func(ctx context.Context) error {
			return nil // the write, inside the guard's atomic step
		})
		if httpfence.WriteError(w, err) {
			return
		}
		fmt.Fprintf(w, "wrote %s with token %d", object, t)
	}))

	req := httptest.NewRequest(http.MethodPost, "/invoices/9", nil)
	req.Header.Set(httpfence.HeaderToken, "12")
	req.Header.Set(httpfence.HeaderResourceID, "invoice-9")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Body)
	// Output:
	// 200 wrote invoice-9 with token 12
}
