package httpfence_test

import (
	"context"
	"net/http"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/httpfence"
)

// httpTarget drives the conformance suite through real HTTP: writes go
// from a Transport to the middleware and the handler, which appends under
// the guard's atomic step; reads look at the resource directly.
type httpTarget struct {
	o   *objects
	url string
	hc  *http.Client
}

func (h *httpTarget) Write(ctx context.Context, object string, t fence.Token, value string) error {
	return post(ctx, h.hc, h.url, object, t, value)
}

func (h *httpTarget) Read(ctx context.Context, object string) (string, fence.Token, error) {
	v, m := h.o.read(object)
	return v, m, nil
}

func (h *httpTarget) Appends() bool { return true }

var _ guardtest.Appender = (*httpTarget)(nil)

func TestMiddleware_Conformance(t *testing.T) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			guardtest.Run(t, func(t *testing.T) guardtest.Target {
				o := newObjects()
				srv := newServer(t, o, s, httpfence.Config{})
				return &httpTarget{o: o, url: srv.URL, hc: fencedClient(srv)}
			})
		})
	}
}
