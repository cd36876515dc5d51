package report

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
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
	// Workloads are the primitives the workers exercised (lock,
	// semaphore, rwlock, election).
	Workloads []string

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
	Workloads      []string  `json:"workloads,omitempty"`
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
		Faults: nonNil(s.Faults), Resource: s.Resource, Workloads: s.Workloads,
		Ops: s.Ops, Grants: s.Grants, StaleRejected: s.StaleRejected,
		FaultsInjected: s.FaultsInjected, Violations: s.Violations,
		ChecksRun: nonNil(s.ChecksRun), Started: s.Started, Ended: s.Ended,
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
		Seed: j.Seed, Nodes: j.Nodes, Duration: d, Faults: j.Faults, Resource: j.Resource, Workloads: j.Workloads,
		Ops: j.Ops, Grants: j.Grants, StaleRejected: j.StaleRejected,
		FaultsInjected: j.FaultsInjected, Violations: j.Violations,
		ChecksRun: j.ChecksRun, Started: j.Started, Ended: j.Ended,
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// isClientOp reports whether op is a client operation, as opposed to a
// fault or a server event.
func isClientOp(op history.Op) bool {
	switch op.Kind {
	case history.OpFault, history.OpServerGrant, history.OpServerRelease, history.OpServerExpire:
		return false
	}
	return op.Process != history.NemesisProcess
}

// Summarize counts the numbers of a Summary from a history: Ops (client
// operations), Grants (acquires with Outcome OK), StaleRejected (writes with
// Outcome Stale), FaultsInjected (fault ops with Outcome "start") and
// Violations; Started and Ended are the first invocation and the last
// completion in h. The caller fills in the run's settings (Seed, Nodes,
// Duration, Faults, Resource, ChecksRun) and may replace Started and Ended by
// the run's own bounds.
func Summarize(h history.History, violations []checker.Violation) Summary {
	s := Summary{Violations: len(violations)}
	t0, t1 := bounds(h)
	if len(h) > 0 {
		s.Started, s.Ended = time.Unix(0, t0), time.Unix(0, t1)
	}
	for _, op := range h {
		switch {
		case op.Kind == history.OpFault:
			if op.Outcome == "start" {
				s.FaultsInjected++
			}
		case !isClientOp(op):
		default:
			s.Ops++
			if op.Kind == history.OpAcquire && op.Outcome == history.OK {
				s.Grants++
			}
			if op.Kind == history.OpWrite && op.Outcome == history.Stale {
				s.StaleRejected++
			}
		}
	}
	return s
}

// bounds returns the first invocation and the last completion (or
// invocation, for ops that never completed) in h, in Unix nanoseconds.
func bounds(h history.History) (t0, t1 int64) {
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
