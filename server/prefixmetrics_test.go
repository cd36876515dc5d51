package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// scrape returns the server's /metrics text.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Grants, releases, revocations and expiries of names under two top-level
// prefixes are counted per group at the default depth 1: no series names a
// whole lock name, hold and wait times are observed per group.
func TestPrefixMetrics_ByDepth(t *testing.T) {
	a := newAPI(t, func(c *server.Config) { c.AllowRevoke = true })
	s1, s2 := a.session(t, 30000), a.session(t, 30000)
	for i, name := range []string{"orders/eu/1", "orders/us/2"} {
		if _, err := a.acquire(t, name, s1, uint64(i+1), 0); err != nil {
			t.Fatal(err)
		}
	}
	g, err := a.acquire(t, "billing/1", s2, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.locks.Release(context.Background(), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "orders/eu/1", Session: s1, Secret: secretOf(s1), Seq: 3})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.locks.Revoke(context.Background(), connect.NewRequest(&fencedv1.RevokeRequest{Name: "billing/1", Token: g.Grant.Token, Reason: "test"})); err != nil {
		t.Fatal(err)
	}
	short := a.session(t, 1000)
	if _, err := a.acquire(t, "billing/2", short, 1, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "expiry counted", func() bool {
		return strings.Contains(scrape(t, a.addr), `fenced_prefix_expiries_total{group="billing/",kind="lock"} 1`)
	})
	m := scrape(t, a.addr)
	for _, want := range []string{
		`fenced_prefix_grants_total{group="orders/",kind="lock"} 2`,
		`fenced_prefix_grants_total{group="billing/",kind="lock"} 2`,
		`fenced_prefix_revocations_total{group="billing/",kind="lock"} 1`,
		`fenced_prefix_hold_seconds_count{group="orders/",kind="lock"} 1`,
		`fenced_prefix_hold_seconds_count{group="billing/",kind="lock"} 2`,
		`fenced_prefix_wait_seconds_count{group="orders/",kind="lock"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(m, `group="orders/eu/`) || strings.Contains(m, `"billing/1"`) {
		t.Errorf("a series is labelled with more than the group:\n%s", grep(m, "fenced_prefix_"))
	}
}

// --metrics-group: only the listed prefixes get a group, the longest wins,
// the rest is _other.
func TestPrefixMetrics_ExplicitGroups(t *testing.T) {
	a := newAPI(t, func(c *server.Config) { c.Metrics.Groups = []string{"orders/", "orders/eu/"} })
	s := a.session(t, 30000)
	for i, name := range []string{"orders/eu/1", "orders/us/1", "billing/1"} {
		if _, err := a.acquire(t, name, s, uint64(i+1), 0); err != nil {
			t.Fatal(err)
		}
	}
	m := scrape(t, a.addr)
	for _, want := range []string{`group="orders/eu/",kind="lock"} 1`, `group="orders/",kind="lock"} 1`, `group="_other",kind="lock"} 1`} {
		if !strings.Contains(m, "fenced_prefix_grants_total{"+want) {
			t.Errorf("/metrics lacks fenced_prefix_grants_total{%s\n%s", want, grep(m, "fenced_prefix_grants_total"))
		}
	}
}

// A client that uses a new top-level name for every lock cannot grow the
// series past --metrics-max-groups.
func TestPrefixMetrics_Bounded(t *testing.T) {
	a := newAPI(t, func(c *server.Config) { c.Metrics.MaxGroups = 5 })
	s := a.session(t, 30000)
	for i := range 50 {
		if _, err := a.acquire(t, fmt.Sprintf("tenant%d/lock", i), s, uint64(i+1), 0); err != nil {
			t.Fatal(err)
		}
	}
	m := scrape(t, a.addr)
	n := len(regexp.MustCompile(`(?m)^fenced_prefix_grants_total\{`).FindAllString(m, -1))
	if n != 6 || !strings.Contains(m, `fenced_prefix_grants_total{group="_overflow",kind="lock"} 45`) {
		t.Fatalf("%d series, want 5 groups and _overflow with 45:\n%s", n, grep(m, "fenced_prefix_grants_total"))
	}
}

func TestConfig_RefusesBadMetricsGrouping(t *testing.T) {
	for _, mc := range []server.MetricsConfig{{PrefixDepth: -1}, {MaxGroups: -1}, {Groups: []string{""}}} {
		c := server.DefaultConfig()
		c.Metrics = mc
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", mc)
		}
	}
}

// --log-grants logs grant and release at info level with the fields an
// audit needs; without it nothing is logged at info.
func TestLogGrants(t *testing.T) {
	for _, on := range []bool{true, false} {
		var buf syncBuffer
		a := newAPI(t, func(c *server.Config) {
			c.LogGrants = on
			c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		})
		s := a.session(t, 30000)
		g, err := a.acquire(t, "audit/1", s, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.locks.Release(context.Background(), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "audit/1", Session: s, Secret: secretOf(s), Seq: 2})); err != nil {
			t.Fatal(err)
		}
		grant := fmt.Sprintf(`"msg":"grant","kind":"lock","name":"audit/1","scope":"audit/1","session":%d,"token":%d`, s, g.Grant.Token)
		release := fmt.Sprintf(`"msg":"release","kind":"lock","name":"audit/1","session":%d,"token":%d,"reason":"released"`, s, g.Grant.Token)
		if on {
			waitFor(t, "release logged", func() bool { return strings.Contains(buf.String(), release) })
			if !strings.Contains(buf.String(), grant) {
				t.Errorf("log lacks %s:\n%s", grant, buf.String())
			}
		} else if strings.Contains(buf.String(), `"msg":"grant"`) || strings.Contains(buf.String(), `"msg":"release"`) {
			t.Errorf("grants logged at info without --log-grants:\n%s", buf.String())
		}
	}
}

func grep(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
