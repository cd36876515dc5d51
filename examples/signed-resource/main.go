// Command signed-resource is a protected HTTP resource that accepts a
// write only with a signed grant for the object it writes: the fencing
// middleware (httpfence) in front of guard.Signed in front of an in-memory
// watermark guard. It loads the cluster's public keys once, at start, from
// GET /.well-known/fenced-keys.
//
//	go run ./examples/signed-resource --keys http://127.0.0.1:7700/.well-known/fenced-keys --listen 127.0.0.1:8080
//
// A PUT of /objects/NAME writes object NAME (the request's X-Resource-Id,
// when sent, wins) with the headers X-Fencing-Token and X-Fencing-Grant of
// a grant whose scope covers NAME; GET /objects/NAME reads it back.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

func main() {
	keysURL := flag.String("keys", "http://127.0.0.1:7700/.well-known/fenced-keys", "the cluster's key set (any member)")
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on")
	flag.Parse()
	keys, err := loadKeys(*keysURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "signed-resource:", err)
		os.Exit(1)
	}
	h, err := newHandler(keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "signed-resource:", err)
		os.Exit(1)
	}
	log.Printf("serving %s; grants of issuer %s, %d keys", *listen, keys.Issuer(), len(keys.Keys()))
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// loadKeys fetches and loads the cluster's key set.
func loadKeys(url string) (*fence.KeySet, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return fence.LoadKeySet(body)
}

// newHandler returns the resource: objects in memory, written only
// through guard.Do behind the middleware with a Signed guard.
func newHandler(keys *fence.KeySet) (http.Handler, error) {
	var marks guard.Memory
	var mu sync.Mutex
	objects := map[string]string{}
	mw, err := httpfence.New(httpfence.Config{
		Guard:   guard.Signed(&marks, keys),
		Resolve: func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/objects/") },
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /objects/{name...}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		v, ok := objects[r.PathValue("name")]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, v)
	})
	mux.HandleFunc("PUT /objects/{name...}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		object, t, _ := guard.TokenFrom(r.Context())
		err = guard.Do(r.Context(), func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			objects[object] = strings.TrimSpace(string(body))
			return nil
		})
		if err != nil {
			if !httpfence.WriteError(w, err) {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		fmt.Fprintf(w, "%s: written with token %d\n", object, t)
	})
	return mw.Handler(mux), nil
}
