package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
)

// objects is the protected resource of the tests: values per object,
// appended to by POST /objects, with their watermarks in a guard.Memory.
type objects struct {
	marks  guard.Memory
	mu     sync.Mutex
	values map[string]string
}

func newObjects() *objects { return &objects{values: map[string]string{}} }

func (o *objects) append(object, value string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if v := o.values[object]; v != "" {
		value = v + "," + value
	}
	o.values[object] = value
}

func (o *objects) read(object string) (string, fence.Token) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.values[object], o.marks.Watermark(object)
}

// writeHandler appends the request body to the request's object; with
// useDo through guard.Do, else directly (relying on AroundHandler).
func (o *objects) writeHandler(useDo bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		object, _, ok := guard.TokenFrom(r.Context())
		if !ok {
			http.Error(w, "not fenced", http.StatusInternalServerError)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		write := func(ctx context.Context) error {
			o.append(object, string(body))
			return nil
		}
		if useDo {
			err = guard.Do(r.Context(), write)
		} else {
			err = write(r.Context())
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

// setup is one way to wire the middleware and the handler.
type setup struct {
	name  string
	mode  guard.Mode
	useDo bool
}

var setups = []setup{
	{"InHandler+Do", guard.InHandler, true},
	{"AroundHandler", guard.AroundHandler, false},
	{"AroundHandler+Do", guard.AroundHandler, true},
}

// newServer starts an httptest server fencing o's write handler with cfg
// (whose Guard and Mode are filled in from o and s).
func newServer(t *testing.T, o *objects, s setup, cfg httpfence.Config) *httptest.Server {
	t.Helper()
	cfg.Guard = &o.marks
	cfg.Mode = s.mode
	mw, err := httpfence.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(mw.Handler(o.writeHandler(s.useDo)))
	t.Cleanup(srv.Close)
	return srv
}

// fencedClient returns a client sending through a Transport to srv.
func fencedClient(srv *httptest.Server) *http.Client {
	return &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
}

// post sends value to srv's /objects with token t for object.
func post(ctx context.Context, hc *http.Client, url, object string, t fence.Token, value string) error {
	ctx = httpfence.WithToken(ctx, object, t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/objects", strings.NewReader(value))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return errors.New(resp.Status + ": " + string(b))
	}
	return nil
}

// decode reads a JSON object of strings.
func decode(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object of strings: %v", body, err)
	}
	return m
}
