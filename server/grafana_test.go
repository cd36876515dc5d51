package server_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenced-dev/fenced/guard/guardmetrics"
	"github.com/fenced-dev/fenced/internal/testserver"
)

// registered returns every series name a collector describes, with the
// label names of each (histograms as their _bucket, _sum and _count).
func registered(t *testing.T, cs ...prometheus.Collector) map[string]map[string]bool {
	t.Helper()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	vars := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string]map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 1024)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			labels := map[string]bool{"instance": true, "job": true, "le": true}
			if v := vars.FindStringSubmatch(d.String()); v != nil {
				for _, l := range strings.Split(v[1], ",") {
					if l = strings.TrimSpace(l); l != "" {
						labels[l] = true
					}
				}
			}
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				out[m[1]+suffix] = labels
			}
		}
	}
	return out
}

// TestGrafanaDashboard_UsesOnlyRealSeries reads docs/grafana-dashboard.json
// and checks that every query names at least one series, that every fenced_
// name in it is registered by the server or by guardmetrics, and that every
// label it groups or filters by is a label of those series.
func TestGrafanaDashboard_UsesOnlyRealSeries(t *testing.T) {
	srv := testserver.Start(t)
	gm, err := guardmetrics.New(guardmetrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	series := registered(t, srv.Registry(), gm)
	for _, must := range []string{"fenced_prefix_wait_seconds_bucket", "fenced_prefix_hold_seconds_bucket", "fenced_prefix_grants_total", "fenced_guard_stale_rejected_total"} {
		if series[must] == nil {
			t.Fatalf("the registry walk is broken: %s not found among %d series", must, len(series))
		}
	}

	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	name := regexp.MustCompile(`\bfenced_[a-zA-Z0-9_]+`)
	by := regexp.MustCompile(`\bby \(([^)]*)\)`)
	matcher := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	queries := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			names := name.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no fenced series", p.Title, tg.Expr)
				continue
			}
			labels := map[string]bool{}
			for _, n := range names {
				if series[n] == nil {
					t.Errorf("panel %q: %s is not a series the server or the guards export", p.Title, n)
					continue
				}
				for l := range series[n] {
					labels[l] = true
				}
			}
			var used []string
			for _, m := range by.FindAllStringSubmatch(tg.Expr, -1) {
				used = append(used, strings.Split(m[1], ",")...)
			}
			for _, m := range matcher.FindAllStringSubmatch(tg.Expr, -1) {
				used = append(used, m[1])
			}
			for _, l := range used {
				if l = strings.TrimSpace(l); !labels[l] {
					t.Errorf("panel %q: query %q uses label %q, which %v do not have", p.Title, tg.Expr, l, names)
				}
			}
		}
	}
	if queries < 10 {
		t.Fatalf("only %d queries parsed; is the file's shape what the test expects?", queries)
	}
}
