package main

import (
	"fmt"
	"io"
	"strings"
)

// writeTable writes rows as the markdown table of docs/benchmarks.md.
func writeTable(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| live sessions (each holding a lock) | server RSS (per session) | server CPU at rest (renewals/s) | snapshot: size / encode / write | restart, kill -9 to ready / all present (restore) | catch-up: 2nd / 3rd member | load (1/5/15 min) |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--|\n")
	for _, r := range rows {
		var catch []string
		for i, s := range r.CatchUpS {
			how := "log"
			if r.CatchUpSnapshot[i] {
				how = "snapshot"
			}
			catch = append(catch, fmt.Sprintf("%s (%s)", secs(s), how))
		}
		if r.CatchUpError != "" {
			catch = append(catch, "not caught up (see catch_up_error)")
		}
		if len(catch) == 0 {
			catch = []string{"—"}
		}
		sessions := count(r.Sessions)
		if len(r.Env) > 0 {
			sessions += " (" + strings.Join(r.Env, " ") + ")"
		}
		renewals := count(int(r.RenewalsPerS + 0.5))
		if r.RenewalsCountedPerS > 0 {
			renewals += "; counted " + count(int(r.RenewalsCountedPerS+0.5))
		}
		fmt.Fprintf(&b, "| %s | %s MiB (%s B) | %.1f %% (%s) | %s / %s / %s | %s / %s (%s) | %s | %s |\n",
			sessions, count(int(r.RSSMiB+0.5)), count(int(r.BytesPerSession+0.5)), r.CPUPercent, renewals,
			size(r.SnapshotBytes), millis(r.SnapshotEncodeMs), millis(r.SnapshotPersistMs),
			secs(r.RestartReadyS), secs(r.RestartAllS), millis(r.RestoreMs),
			strings.Join(catch, " / "), r.Load)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// count writes n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func size(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func millis(ms float64) string {
	if ms >= 1000 {
		return secs(ms / 1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0f ms", s*1000)
	}
	return fmt.Sprintf("%.1f s", s)
}
