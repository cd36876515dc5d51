package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/fenced-dev/fenced/check/checker"
	"github.com/fenced-dev/fenced/check/history"
)

// Report file names, inside the directory given to Write.
const (
	HistoryFile    = "history.jsonl"
	SummaryFile    = "summary.json"
	ViolationsFile = "violations.json"
	ReportFile     = "report.html"
)

// Write writes into dir, creating it if needed: the whole history as
// JSON lines (history.jsonl, see History.WriteJSONLines), the summary
// (summary.json), the violations with their operations (violations.json, an
// empty list when the run passed) and report.html, a self-contained page with
// the summary, the violations and a timeline of the run to open in any
// browser, offline.
func Write(dir string, h history.History, violations []checker.Violation, s Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if violations == nil {
		violations = []checker.Violation{}
	}
	files := []struct {
		name  string
		write func(w io.Writer) error
	}{
		{HistoryFile, h.WriteJSONLines},
		{SummaryFile, func(w io.Writer) error { return writeJSON(w, s) }},
		{ViolationsFile, func(w io.Writer) error { return writeJSON(w, violations) }},
		{ReportFile, func(w io.Writer) error { return writeHTML(w, h, violations, s) }},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.write); err != nil {
			return fmt.Errorf("report: write %s: %w", f.name, err)
		}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeFile(path string, write func(w io.Writer) error) error {
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

// relTime formats an offset in nanoseconds from the start of the run, such as
// "+4.120s" or "+2m05.250s".
func relTime(ns int64) string {
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
