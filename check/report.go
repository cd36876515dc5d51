package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Summary is the outcome of a run, written to summary.json and shown atop the
// report.
type Summary struct {
	// Seed is the seed of the fault schedule and the workload.
	Seed int64
	// Nodes is the size of the cluster.
	Nodes int
	// Duration is how long faults were injected.
	Duration time.Duration
	// Faults lists the fault kinds enabled for the run.
	Faults []string
	// Resource is "fenced" (the kv resource checks tokens) or "unfenced"
	// (a control run in which it does not).
	Resource string

	// Ops counts client operations (acquire, release, expire, write, read),
	// whatever their outcome.
	Ops int
	// Grants counts acquires that succeeded.
	Grants int
	// StaleRejected counts writes the resource rejected for a stale token.
	StaleRejected int
	// FaultsInjected counts faults started by the nemesis.
	FaultsInjected int
	// Violations counts failed checks.
	Violations int

	// ChecksRun names the checkers the history went through.
	ChecksRun []string
	// Started and Ended bound the run.
	Started, Ended time.Time
}

// Line returns the one-line summary printed last on stdout, such as
//
//	ops=18234 grants=2210 stale_rejected=37 faults=41 violations=0
func (s Summary) Line() string {
	return fmt.Sprintf("ops=%d grants=%d stale_rejected=%d faults=%d violations=%d",
		s.Ops, s.Grants, s.StaleRejected, s.FaultsInjected, s.Violations)
}

// summaryJSON is the form of Summary in summary.json: snake_case names, the
// duration as text ("10m0s") and the one-line summary for scripts.
type summaryJSON struct {
	Seed           int64     `json:"seed"`
	Nodes          int       `json:"nodes"`
	Duration       string    `json:"duration"`
	Faults         []string  `json:"faults"`
	Resource       string    `json:"resource"`
	Ops            int       `json:"ops"`
	Grants         int       `json:"grants"`
	StaleRejected  int       `json:"stale_rejected"`
	FaultsInjected int       `json:"faults_injected"`
	Violations     int       `json:"violations"`
	ChecksRun      []string  `json:"checks_run"`
	Started        time.Time `json:"started"`
	Ended          time.Time `json:"ended"`
	Line           string    `json:"line"`
}

// MarshalJSON writes s as summary.json has it: snake_case names, Duration as
// text such as "10m0s", and the one-line summary under "line".
func (s Summary) MarshalJSON() ([]byte, error) {
	return json.Marshal(summaryJSON{
		Seed: s.Seed, Nodes: s.Nodes, Duration: s.Duration.String(),
		Faults: repNonNil(s.Faults), Resource: s.Resource,
		Ops: s.Ops, Grants: s.Grants, StaleRejected: s.StaleRejected,
		FaultsInjected: s.FaultsInjected, Violations: s.Violations,
		ChecksRun: repNonNil(s.ChecksRun), Started: s.Started, Ended: s.Ended,
		Line: s.Line(),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var j summaryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var d time.Duration
	if j.Duration != "" {
		var err error
		if d, err = time.ParseDuration(j.Duration); err != nil {
			return fmt.Errorf("summary duration: %w", err)
		}
	}
	*s = Summary{
		Seed: j.Seed, Nodes: j.Nodes, Duration: d, Faults: j.Faults, Resource: j.Resource,
		Ops: j.Ops, Grants: j.Grants, StaleRejected: j.StaleRejected,
		FaultsInjected: j.FaultsInjected, Violations: j.Violations,
		ChecksRun: j.ChecksRun, Started: j.Started, Ended: j.Ended,
	}
	return nil
}

func repNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// repIsClientOp reports whether op is a client operation, as opposed to a
// fault or a server event.
func repIsClientOp(op Op) bool {
	switch op.Kind {
	case OpFault, OpServerGrant, OpServerRelease, OpServerExpire:
		return false
	}
	return op.Process != repNemesis
}

const repNemesis = "nemesis"

// Summarize counts the numbers of a Summary from a history: Ops (client
// operations), Grants (acquires with Outcome OK), StaleRejected (writes with
// Outcome Stale), FaultsInjected (fault ops with Outcome "start") and
// Violations; Started and Ended are the first invocation and the last
// completion in h. The caller fills in the run's settings (Seed, Nodes,
// Duration, Faults, Resource, ChecksRun) and may replace Started and Ended by
// the run's own bounds.
func Summarize(h History, violations []Violation) Summary {
	s := Summary{Violations: len(violations)}
	t0, t1 := repBounds(h)
	if len(h) > 0 {
		s.Started, s.Ended = time.Unix(0, t0), time.Unix(0, t1)
	}
	for _, op := range h {
		switch {
		case op.Kind == OpFault:
			if op.Outcome == "start" {
				s.FaultsInjected++
			}
		case !repIsClientOp(op):
		default:
			s.Ops++
			if op.Kind == OpAcquire && op.Outcome == OK {
				s.Grants++
			}
			if op.Kind == OpWrite && op.Outcome == Stale {
				s.StaleRejected++
			}
		}
	}
	return s
}

// repBounds returns the first invocation and the last completion (or
// invocation, for ops that never completed) in h, in Unix nanoseconds.
func repBounds(h History) (t0, t1 int64) {
	first := true
	for _, op := range h {
		if op.Invoke == 0 && op.Complete == 0 {
			continue
		}
		start, end := op.Invoke, max(op.Invoke, op.Complete)
		if start == 0 {
			start = end
		}
		if first || start < t0 {
			t0 = start
		}
		if first || end > t1 {
			t1 = end
		}
		first = false
	}
	return t0, t1
}

// Report file names, inside the directory given to WriteReport.
const (
	HistoryFile    = "history.jsonl"
	SummaryFile    = "summary.json"
	ViolationsFile = "violations.json"
	ReportFile     = "report.html"
)

// WriteReport writes into dir, creating it if needed: the whole history as
// JSON lines (history.jsonl, see History.WriteJSONLines), the summary
// (summary.json), the violations with their operations (violations.json, an
// empty list when the run passed) and report.html, a self-contained page with
// the summary, the violations and a timeline of the run to open in any
// browser, offline.
func WriteReport(dir string, h History, violations []Violation, s Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if violations == nil {
		violations = []Violation{}
	}
	files := []struct {
		name  string
		write func(w io.Writer) error
	}{
		{HistoryFile, h.WriteJSONLines},
		{SummaryFile, func(w io.Writer) error { return repWriteJSON(w, s) }},
		{ViolationsFile, func(w io.Writer) error { return repWriteJSON(w, violations) }},
		{ReportFile, func(w io.Writer) error { return repWriteHTML(w, h, violations, s) }},
	}
	for _, f := range files {
		if err := repWriteFile(filepath.Join(dir, f.name), f.write); err != nil {
			return fmt.Errorf("report: write %s: %w", f.name, err)
		}
	}
	return nil
}

func repWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func repWriteFile(path string, write func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// repRel formats an offset in nanoseconds from the start of the run, such as
// "+4.120s" or "+2m05.250s".
func repRel(ns int64) string {
	sign := "+"
	if ns < 0 {
		sign, ns = "-", -ns
	}
	d := time.Duration(ns)
	if d < time.Minute {
		return fmt.Sprintf("%s%.3fs", sign, d.Seconds())
	}
	m := int64(d / time.Minute)
	rest := (d - time.Duration(m)*time.Minute).Seconds()
	return fmt.Sprintf("%s%dm%06.3fs", sign, m, rest)
}
