package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/httplimit"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// TestMiddlewareAgainstServer: against a real fenced server, a fixed window
// of 3 per minute lets the first three requests through to the handler and
// answers the fourth 429 with a Retry-After in whole seconds within the
// window, without calling the handler.
func TestMiddlewareAgainstServer(t *testing.T) {
	srv := testserver.Start(t)
	c, err := client.New([]string{srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.LimiterConfig(ctx, "api", client.LimiterSpec{Algorithm: client.FixedWindow, Limit: 3, Window: time.Minute}, false); err != nil {
		t.Fatal(err)
	}
	served := 0
	h := httplimit.Limit(c.Limiter("api"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		io.WriteString(w, "ok")
	}))
	web := httptest.NewServer(h)
	defer web.Close()
	var codes []int
	var retry string
	for range 4 {
		resp, err := http.Get(web.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		retry = resp.Header.Get("Retry-After")
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 200 || codes[3] != http.StatusTooManyRequests || served != 3 {
		t.Fatalf("status codes %v, handler served %d; want 200 200 200 429 and 3", codes, served)
	}
	if s, err := strconv.Atoi(retry); err != nil || s < 1 || s > 60 {
		t.Fatalf("Retry-After %q; want whole seconds 1 to 60", retry)
	}

	// A limiter the server cannot answer for (never configured) refuses
	// with 503 by default, and lets requests through with FailOpen.
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, tc := range []struct {
		opts []httplimit.Option
		want int
	}{{nil, http.StatusServiceUnavailable}, {[]httplimit.Option{httplimit.FailOpen()}, http.StatusOK}} {
		rec := httptest.NewRecorder()
		var seen error
		opts := append(tc.opts, httplimit.OnError(func(_ *http.Request, err error) { seen = err }))
		httplimit.Limit(c.Limiter("unconfigured"), opts...)(next).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil).WithContext(ctx))
		if rec.Code != tc.want || seen == nil {
			t.Errorf("unconfigured limiter: status %d (error %v), want %d and an error", rec.Code, seen, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1001 * time.Millisecond: "2", time.Minute: "60"} {
		if got := httplimit.RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %s, want %s", d, got, want)
		}
	}
}
