// Package report writes what a run of the fault harness leaves behind:
// history.jsonl, summary.json, violations.json and report.html, a
// self-contained page with the summary, the violations and a timeline of
// the run (one SVG lane per client, server node and the nemesis; drawn by
// the timeline*.go files).
package report
