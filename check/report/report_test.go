package report_test

import (
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/check/report"
)

// go test ./check/report -run TestWriteReport -report.out=/tmp/report also writes
// the sample reports there, to look at in a browser.
var reportOut = flag.String("report.out", "", "also write the sample reports into this directory")

// base is the time the synthetic histories start at.
var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// at returns base + sec seconds in Unix nanoseconds.
func at(sec float64) int64 { return base + int64(sec*1e9) }

// staleStory is a small run with the classic stale writer: p1 holds lock-a
// with token 3, is paused past its TTL, p2 gets lock-a with token 5 and
// writes, p1 wakes up and writes with token 3 and the resource rejects it.
// It also has a partition, a kill, a leadership transfer, a write with an
// unknown outcome and, for the report to show, a violation.
func staleStory() (history.History, []checker.Violation) {
	p2Write := history.Op{Process: "p2", Kind: history.OpWrite, Key: "lock-a", Token: 5, Value: "p2-1-0", Version: 3, Invoke: at(5.3), Complete: at(5.34), Outcome: history.OK}
	finalRead := history.Op{Process: "final", Kind: history.OpRead, Key: "lock-a", Token: 5, Value: "p1-0-1", Version: 2, Invoke: at(9.6), Complete: at(9.62), Outcome: history.OK}
	h := history.History{
		{Process: "p1", Kind: history.OpAcquire, Name: "lock-a", Session: 101, Token: 3, Invoke: at(0.1), Complete: at(0.15), Outcome: history.OK},
		{Process: "n1", Kind: history.OpServerGrant, Name: "lock-a", Session: 101, Token: 3, Seq: 7, Invoke: at(0.14), Complete: at(0.14)},
		{Process: "n2", Kind: history.OpServerGrant, Name: "lock-a", Session: 101, Token: 3, Seq: 7, Invoke: at(0.145), Complete: at(0.145)},
		{Process: "n3", Kind: history.OpServerGrant, Name: "lock-a", Session: 101, Token: 3, Seq: 7, Invoke: at(0.146), Complete: at(0.146)},
		{Process: "p1", Kind: history.OpRead, Key: "lock-a", Invoke: at(0.3), Complete: at(0.32), Outcome: history.NotFound},
		{Process: "p1", Kind: history.OpWrite, Key: "lock-a", Token: 3, Value: "p1-0-0", Version: 1, Invoke: at(0.5), Complete: at(0.53), Outcome: history.OK},
		{Process: "p1", Kind: history.OpWrite, Key: "lock-a", Token: 3, Value: "p1-0-1", Version: 2, Invoke: at(1.0), Complete: at(1.02), Outcome: history.OK},
		{Process: "p2", Kind: history.OpAcquire, Name: "lock-a", Session: 102, Token: 5, Invoke: at(1.2), Complete: at(4.8), Outcome: history.OK},
		{Process: "nemesis", Kind: history.OpFault, Fault: "pause-client", Target: "p1", Invoke: at(1.4), Complete: at(1.4), Outcome: "start"},
		{Process: "p1", Kind: history.OpAcquire, Name: "lock-b", Session: 103, Invoke: at(1.3), Complete: at(1.38), Outcome: history.Fail, Error: "lock-b is held"},
		{Process: "nemesis", Kind: history.OpFault, Fault: "partition", Target: "isolate n3", Invoke: at(2.5), Complete: at(2.5), Outcome: "start"},
		{Process: "n1", Kind: history.OpServerExpire, Name: "lock-a", Session: 101, Token: 3, Seq: 10, Invoke: at(4.7), Complete: at(4.7)},
		{Process: "n2", Kind: history.OpServerExpire, Name: "lock-a", Session: 101, Token: 3, Seq: 10, Invoke: at(4.71), Complete: at(4.71)},
		{Process: "n1", Kind: history.OpServerGrant, Name: "lock-a", Session: 102, Token: 5, Seq: 11, Invoke: at(4.75), Complete: at(4.75)},
		{Process: "n2", Kind: history.OpServerGrant, Name: "lock-a", Session: 102, Token: 5, Seq: 11, Invoke: at(4.76), Complete: at(4.76)},
		{Process: "p2", Kind: history.OpRead, Key: "lock-a", Token: 3, Value: "p1-0-1", Version: 2, Invoke: at(5.0), Complete: at(5.02), Outcome: history.OK},
		p2Write,
		{Process: "nemesis", Kind: history.OpFault, Fault: "partition", Target: "isolate n3", Invoke: at(5.5), Complete: at(5.5), Outcome: "healed"},
		{Process: "n3", Kind: history.OpServerExpire, Name: "lock-a", Session: 101, Token: 3, Seq: 10, Invoke: at(5.6), Complete: at(5.6)},
		{Process: "n3", Kind: history.OpServerGrant, Name: "lock-a", Session: 102, Token: 5, Seq: 11, Invoke: at(5.61), Complete: at(5.61)},
		{Process: "nemesis", Kind: history.OpFault, Fault: "pause-client", Target: "p1", Invoke: at(6.4), Complete: at(6.4), Outcome: "healed"},
		{Process: "p1", Kind: history.OpWrite, Key: "lock-a", Token: 3, Required: 5, Value: "p1-0-2", Invoke: at(6.45), Complete: at(6.5), Outcome: history.Stale},
		{Process: "p1", Kind: history.OpExpire, Name: "lock-a", Session: 101, Token: 3, Invoke: at(6.52), Complete: at(6.6), Outcome: history.OK},
		{Process: "p2", Kind: history.OpWrite, Key: "lock-a", Token: 5, Value: "p2-1-1", Invoke: at(6.8), Complete: at(7.8), Outcome: history.Unknown, Error: "context deadline exceeded"},
		{Process: "p1", Kind: history.OpAcquire, Name: "lock-b", Session: 104, Token: 6, Invoke: at(6.9), Complete: at(6.95), Outcome: history.OK},
		{Process: "n1", Kind: history.OpServerGrant, Name: "lock-b", Session: 104, Token: 6, Seq: 12, Invoke: at(6.94), Complete: at(6.94)},
		{Process: "n2", Kind: history.OpServerGrant, Name: "lock-b", Session: 104, Token: 6, Seq: 12, Invoke: at(6.945), Complete: at(6.945)},
		{Process: "n3", Kind: history.OpServerGrant, Name: "lock-b", Session: 104, Token: 6, Seq: 12, Invoke: at(6.946), Complete: at(6.946)},
		{Process: "p1", Kind: history.OpWrite, Key: "lock-b", Token: 6, Value: "p1-1-0", Version: 1, Invoke: at(7.2), Complete: at(7.23), Outcome: history.OK},
		{Process: "nemesis", Kind: history.OpFault, Fault: "transfer", Target: "n2", Invoke: at(7.5), Complete: at(7.5), Outcome: "start"},
		{Process: "nemesis", Kind: history.OpFault, Fault: "transfer", Target: "n2", Invoke: at(7.5), Complete: at(7.5), Outcome: "healed"},
		{Process: "p2", Kind: history.OpRelease, Name: "lock-a", Session: 102, Token: 5, Result: "released", Invoke: at(8.2), Complete: at(8.25), Outcome: history.OK},
		{Process: "p1", Kind: history.OpWrite, Key: "lock-b", Token: 6, Value: "p1-1-1", Version: 2, Invoke: at(8.3), Complete: at(8.32), Outcome: history.OK},
		{Process: "p1", Kind: history.OpRelease, Name: "lock-b", Session: 104, Token: 6, Result: "released", Invoke: at(8.5), Complete: at(8.55), Outcome: history.OK},
		{Process: "nemesis", Kind: history.OpFault, Fault: "kill", Target: "n1", Invoke: at(8.6), Complete: at(8.6), Outcome: "start"},
		{Process: "nemesis", Kind: history.OpFault, Fault: "all", Invoke: at(9.4), Complete: at(9.4), Outcome: "healed"},
		finalRead,
	}
	vs := []checker.Violation{{
		Check:   "lost-ack",
		Message: "write lock-a=p2-1-0 was acknowledged with version 3, but the final read returned version 2",
		Ops:     []history.Op{p2Write, finalRead},
	}}
	return h, vs
}

func storySummary(h history.History, vs []checker.Violation) report.Summary {
	s := report.Summarize(h, vs)
	s.Seed, s.Nodes, s.Duration, s.Resource = 42, 3, 10*time.Second, "fenced"
	s.Faults = []string{"pause-client", "partition", "kill", "transfer"}
	s.ChecksRun = []string{"stale-write", "token-order", "mutual-exclusion", "linearizability", "lost-ack"}
	return s
}

func outDir(t *testing.T, name string) string {
	if *reportOut != "" {
		return filepath.Join(*reportOut, name)
	}
	return t.TempDir()
}

func TestSummarize(t *testing.T) {
	h, vs := staleStory()
	s := report.Summarize(h, vs)
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"Ops", s.Ops, 17},
		{"Grants", s.Grants, 3},
		{"StaleRejected", s.StaleRejected, 1},
		{"FaultsInjected", s.FaultsInjected, 4},
		{"Violations", s.Violations, 1},
	} {
		if c.got != c.want {
			t.Errorf("Summarize().%s=%d, want %d", c.name, c.got, c.want)
		}
	}
	if got, want := s.Started.UnixNano(), at(0.1); got != want {
		t.Errorf("Summarize().Started=%v, want %v", s.Started, time.Unix(0, want))
	}
	if got, want := s.Ended.UnixNano(), at(9.62); got != want {
		t.Errorf("Summarize().Ended=%v, want %v", s.Ended, time.Unix(0, want))
	}
}

func TestSummary_Line(t *testing.T) {
	for _, tt := range []struct {
		s    report.Summary
		want string
	}{
		{report.Summary{}, "ops=0 grants=0 stale_rejected=0 faults=0 violations=0"},
		{report.Summary{Ops: 18234, Grants: 2210, StaleRejected: 37, FaultsInjected: 41, Violations: 0, Seed: 7, Nodes: 5},
			"ops=18234 grants=2210 stale_rejected=37 faults=41 violations=0"},
		{report.Summary{Ops: 1, Grants: 2, StaleRejected: 3, FaultsInjected: 4, Violations: 5},
			"ops=1 grants=2 stale_rejected=3 faults=4 violations=5"},
	} {
		if got := tt.s.Line(); got != tt.want {
			t.Errorf("Line()=%q, want %q", got, tt.want)
		}
	}
}

func TestSummary_JSON(t *testing.T) {
	h, vs := staleStory()
	s := storySummary(h, vs)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"duration":"10s"`, `"stale_rejected":1`, `"line":"ops=17 grants=3 stale_rejected=1 faults=4 violations=1"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("summary JSON %s lacks %s", b, want)
		}
	}
	var got report.Summary
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Line() != s.Line() || got.Duration != s.Duration || got.Seed != s.Seed || !got.Started.Equal(s.Started) ||
		strings.Join(got.Faults, ",") != strings.Join(s.Faults, ",") {
		t.Errorf("summary JSON round trip=%+v, want %+v", got, s)
	}
}

func TestWriteReport(t *testing.T) {
	h, vs := staleStory()
	s := storySummary(h, vs)
	dir := outDir(t, "story")
	if err := report.Write(dir, h, vs, s); err != nil {
		t.Fatalf("Write: %v", err)
	}

	gotH, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil || len(gotH) != len(h) {
		t.Fatalf("history.jsonl: %d ops, %v; want %d ops", len(gotH), err, len(h))
	}
	var gotS report.Summary
	readJSON(t, filepath.Join(dir, "summary.json"), &gotS)
	if gotS.Line() != s.Line() || gotS.Seed != 42 {
		t.Errorf("summary.json: %q seed %d, want %q seed 42", gotS.Line(), gotS.Seed, s.Line())
	}
	var gotV []checker.Violation
	readJSON(t, filepath.Join(dir, "violations.json"), &gotV)
	if len(gotV) != 1 || gotV[0].Check != "lost-ack" || len(gotV[0].Ops) != 2 {
		t.Errorf("violations.json=%+v, want the lost-ack violation with 2 ops", gotV)
	}

	page := readFile(t, filepath.Join(dir, "report.html"))
	checkSelfContained(t, page)
	checkHTML(t, page)
	svgs := svgParts(t, page)
	tl := parseSVG(t, svgs["timeline"])

	// The lanes: clients, the final reader, the nodes and the nemesis.
	labels := strings.Join(allText(t, page), " ")
	for _, lane := range []string{"p1", "p2", "final", "n1", "n2", "n3", "nemesis"} {
		if !strings.Contains(" "+labels+" ", " "+lane+" ") {
			t.Errorf("report has no lane %q (labels %q)", lane, labels)
		}
	}
	// The grant handed over from p1 to p2.
	tl.wantTitle(t, "p1 holds lock-a with token 3")
	tl.wantTitle(t, "p2 holds lock-a with token 5")
	// The red stale tick, with the tokens in its tooltip.
	stale := tl.find(func(e *svgElem) bool { return e.attr["class"] == "stale-write" })
	if len(stale) != 1 {
		t.Fatalf("timeline has %d stale-write marks, want 1", len(stale))
	}
	if title := stale[0].title(); !strings.Contains(title, "presented token 3, required 5") || !strings.Contains(title, "p1") {
		t.Errorf("stale write title=%q, want p1 with presented token 3, required 5", title)
	}
	if !stale[0].has(func(e *svgElem) bool { return e.name == "rect" && e.attr["fill"] == "#e00000" }) {
		t.Errorf("stale write mark has no red rect")
	}
	// The fault spans: the pause over p1's lane, the partition over n3's.
	pause := tl.find(func(e *svgElem) bool {
		return e.name == "g" && strings.HasPrefix(e.title(), "fault pause-client on p1") && e.has(func(c *svgElem) bool { return c.name == "rect" })
	})
	if len(pause) < 2 { // the shading on p1's lane and the bar in the nemesis lane
		t.Errorf("timeline has %d pause-client spans, want 2", len(pause))
	} else if title := pause[0].title(); !strings.Contains(title, "injected +1.300s, healed +6.300s") {
		t.Errorf("pause-client title=%q, want injected +1.300s, healed +6.300s", title)
	}
	tl.wantTitle(t, "fault partition on isolate n3")
	tl.wantTitle(t, "fault kill on n1\ninjected +8.500s, healed +9.300s")
	tl.wantTitle(t, "fault transfer on n2")
	// The unknown write, hatched.
	if len(tl.find(func(e *svgElem) bool {
		return e.attr["fill"] == "url(#hatch)" && strings.Contains(e.title(), "unknown outcome")
	})) != 1 {
		t.Errorf("timeline has no hatched unknown write")
	}
	// The violation: listed at the top, anchored and outlined.
	for _, want := range []string{`id="violations"`, "lost-ack", "the final read returned version 2", `href="#v1"`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if len(tl.find(func(e *svgElem) bool { return e.attr["id"] == "v1" })) != 1 {
		t.Errorf("timeline has no anchor v1")
	}
	outlines := tl.find(func(e *svgElem) bool {
		return e.name == "rect" && e.attr["stroke"] == "#d00000" && strings.HasPrefix(e.title(), "V1 lost-ack")
	})
	if len(outlines) != 2 {
		t.Errorf("timeline outlines %d ops of V1, want 2", len(outlines))
	}
	// The header.
	for _, want := range []string{s.Line(), "FAIL", "seed", "42"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

func TestWriteReport_pass(t *testing.T) {
	h, _ := staleStory()
	s := storySummary(h, nil)
	dir := outDir(t, "pass")
	if err := report.Write(dir, h, nil, s); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "violations.json"))); got != "[]" {
		t.Errorf("violations.json=%s, want []", got)
	}
	page := readFile(t, filepath.Join(dir, "report.html"))
	if !strings.Contains(page, "PASS") || strings.Contains(page, `id="violations"`) {
		t.Errorf("report.html of a passing run does not say PASS, or lists violations")
	}
	parseSVG(t, svgParts(t, page)["timeline"])
}

func TestWriteReport_empty(t *testing.T) {
	dir := t.TempDir()
	if err := report.Write(dir, nil, nil, report.Summary{}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	page := readFile(t, filepath.Join(dir, "report.html"))
	parseSVG(t, svgParts(t, page)["timeline"])
}

// TestWriteReport_large renders a 20,000-op history of ten minutes. How fast
// is measured by BenchmarkWriteReport; this test holds the size bound and
// logs the time.
func TestWriteReport_large(t *testing.T) {
	h, vs := bigHistory(20000, 10*time.Minute)
	s := report.Summarize(h, vs)
	dir := outDir(t, "large")
	start := time.Now()
	if err := report.Write(dir, h, vs, s); err != nil {
		t.Fatalf("Write: %v", err)
	}
	took := time.Since(start)
	fi, err := os.Stat(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops over 10m: report.html %.1f MB in %v", len(h), float64(fi.Size())/1e6, took)
	if fi.Size() > 15<<20 {
		t.Errorf("report.html is %d bytes, want below 15 MB", fi.Size())
	}
	page := readFile(t, filepath.Join(dir, "report.html"))
	tl := parseSVG(t, svgParts(t, page)["timeline"])
	if n := len(tl.find(func(e *svgElem) bool { return e.attr["class"] == "stale-write" })); n != s.StaleRejected {
		t.Errorf("timeline has %d stale writes, want %d (each drawn, never merged)", n, s.StaleRejected)
	}
	if !strings.Contains(page, `id="overview"`) {
		t.Errorf("a long run's report has no overview strip")
	}
}

func BenchmarkWriteReport(b *testing.B) {
	h, vs := bigHistory(20000, 10*time.Minute)
	s := report.Summarize(h, vs)
	dir := b.TempDir()
	for b.Loop() {
		if err := report.Write(dir, h, vs, s); err != nil {
			b.Fatal(err)
		}
	}
}

// bigHistory is n ops of a run of length d: ten clients taking five locks,
// reading and writing under them, five nodes applying the grants, a fault
// every few seconds; a paused holder's late write is rejected now and then.
func bigHistory(n int, d time.Duration) (history.History, []checker.Violation) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h history.History
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	faults := []string{"pause-client", "pause-server", "kill", "partition", "transfer", "skew", "membership"}
	for ft := int64(2e9); ft < int64(d); ft += int64(5e9 + rng.IntN(10e9)) {
		f := faults[rng.IntN(len(faults))]
		target := nodes[rng.IntN(len(nodes))]
		switch f {
		case "pause-client":
			target = fmt.Sprintf("p%d", 1+rng.IntN(10))
		case "partition":
			target = "minority " + nodes[rng.IntN(5)] + "," + nodes[rng.IntN(5)]
		case "skew":
			target += " clock x2"
		}
		end := ft + int64(1e9+rng.IntN(4e9))
		if f == "transfer" {
			end = ft
		}
		h = append(h,
			history.Op{Process: "nemesis", Kind: history.OpFault, Fault: f, Target: target, Invoke: base + ft, Complete: base + ft, Outcome: "start"},
			history.Op{Process: "nemesis", Kind: history.OpFault, Fault: f, Target: target, Invoke: base + end, Complete: base + end, Outcome: "healed"})
	}
	var token uint64 = 1
	var vs []checker.Violation
	clients := 10
	per := (n - len(h)) / clients
	now := make([]int64, clients)
	// Each round is about 11 ops; space the rounds so that n ops fill d.
	gap := int64(d) * int64(clients) * 9 / int64(n)
	for len(h) < n {
		c := rng.IntN(clients)
		done := true
		for _, t := range now {
			done = done && t >= int64(d)
		}
		if done {
			break
		}
		p := fmt.Sprintf("p%d", c+1)
		name := fmt.Sprintf("lock-%d", rng.IntN(5))
		t0 := base + now[c]
		if now[c] >= int64(d) {
			continue
		}
		token++
		tok := token
		acq := history.Op{Process: p, Kind: history.OpAcquire, Name: name, Session: tok, Token: tok, Invoke: t0, Complete: t0 + int64(rng.IntN(2e8)), Outcome: history.OK}
		h = append(h, acq)
		for _, nd := range nodes {
			at := acq.Complete - int64(rng.IntN(1e6))
			h = append(h, history.Op{Process: nd, Kind: history.OpServerGrant, Name: name, Session: tok, Token: tok, Seq: tok, Invoke: at, Complete: at})
		}
		tt := acq.Complete
		for i := 0; i < 2+rng.IntN(6); i++ {
			tt += int64(rng.IntN(5e7))
			op := history.Op{Process: p, Kind: history.OpWrite, Key: name, Token: tok, Value: fmt.Sprintf("%s-%d", p, i), Version: uint64(i + 1), Invoke: tt, Complete: tt + int64(rng.IntN(2e7)), Outcome: history.OK}
			switch r := rng.IntN(100); {
			case r < 2:
				op.Outcome, op.Required, op.Version = history.Stale, tok+1, 0
			case r < 4:
				op.Outcome, op.Error, op.Complete = history.Unknown, "context deadline exceeded", tt+int64(1e9)
			case r < 50:
				op.Kind, op.Value = history.OpRead, ""
			}
			h = append(h, op)
			tt = op.Complete
			if len(vs) < 3 && rng.IntN(per) == 0 {
				vs = append(vs, checker.Violation{Check: "linearizability", Message: fmt.Sprintf("read of %s is not linearizable", name), Ops: []history.Op{op}})
			}
		}
		tt += int64(rng.IntN(5e7))
		h = append(h, history.Op{Process: p, Kind: history.OpRelease, Name: name, Session: tok, Token: tok, Result: "released", Invoke: tt, Complete: tt + int64(rng.IntN(1e7)), Outcome: history.OK})
		now[c] = tt - base + gap/2 + rng.Int64N(gap)
	}
	return h.Sorted(), vs
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(readFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
}

// checkSelfContained fails if the page loads anything: it must work offline.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<link", "@import", "src=", `href="http`, "url(http", "@font-face"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html is not self-contained: it has %q", bad)
		}
	}
}

// checkHTML reads the whole page with a lenient HTML-aware XML decoder.
func checkHTML(t *testing.T, page string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("report.html does not parse: %v", err)
		}
	}
}

// svgParts returns every <svg> element of the page by id ("" for the rest),
// as text.
func svgParts(t *testing.T, page string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatalf("unterminated <svg> in report.html")
		}
		part := rest[i : i+j+len("</svg>")]
		id := ""
		if k := strings.Index(part, ` id="`); k >= 0 && k < strings.Index(part, ">") {
			id = part[k+5 : k+5+strings.Index(part[k+5:], `"`)]
		}
		out[id] += part
		rest = rest[i+j:]
	}
	if out["timeline"] == "" {
		t.Fatalf("report.html has no <svg id=\"timeline\">")
	}
	return out
}

// svgElem is a parsed SVG element.
type svgElem struct {
	name     string
	attr     map[string]string
	text     string
	children []*svgElem
}

func (e *svgElem) title() string {
	for _, c := range e.children {
		if c.name == "title" {
			return c.text
		}
	}
	return ""
}

func (e *svgElem) has(f func(*svgElem) bool) bool { return len(e.find(f)) > 0 }

func (e *svgElem) find(f func(*svgElem) bool) []*svgElem {
	var out []*svgElem
	for _, c := range e.children {
		if f(c) {
			out = append(out, c)
		}
		out = append(out, c.find(f)...)
	}
	return out
}

func (e *svgElem) wantTitle(t *testing.T, prefix string) {
	t.Helper()
	if !e.has(func(c *svgElem) bool { return strings.HasPrefix(c.title(), prefix) }) {
		t.Errorf("timeline has no element titled %q...", prefix)
	}
}

// parseSVG parses one SVG strictly as XML.
func parseSVG(t *testing.T, s string) *svgElem {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	root := &svgElem{}
	stack := []*svgElem{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &svgElem{name: tok.Name.Local, attr: map[string]string{}}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			top.children = append(top.children, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.text += string(tok)
		}
	}
	if len(root.children) != 1 {
		t.Fatalf("SVG has %d top-level elements, want one", len(root.children))
	}
	return root.children[0]
}

// allText returns the text of every SVG element on the page.
func allText(t *testing.T, page string) []string {
	var out []string
	for _, s := range svgParts(t, page) {
		root := parseSVG(t, "<g>"+s+"</g>")
		for _, e := range root.find(func(e *svgElem) bool { return e.name == "text" }) {
			out = append(out, e.text)
		}
	}
	return out
}

func ExampleSummary_Line() {
	s := report.Summary{Ops: 18234, Grants: 2210, StaleRejected: 37, FaultsInjected: 41}
	fmt.Println(s.Line())
	// Output: ops=18234 grants=2210 stale_rejected=37 faults=41 violations=0
}
