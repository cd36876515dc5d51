package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"
)

// invocation is one run of this program whose measurements a merged
// results file holds: the command, when, at which fenced commit, and the
// cases it measured.
type invocation struct {
	Command      string    `json:"command"`
	Generated    time.Time `json:"generated"`
	FencedCommit string    `json:"fenced_commit"`
	Cases        []string  `json:"cases"`
}

// invocations returns raw's invocations; a file from a single run (no
// list) is one invocation of all its cases.
func (raw rawResults) invocations() []invocation {
	if len(raw.Invocations) > 0 {
		return raw.Invocations
	}
	var ids []string
	for _, c := range raw.Cases {
		ids = append(ids, c.ID)
	}
	return []invocation{{Command: commandLine(raw.Settings), Generated: raw.Generated, FencedCommit: raw.Environment.FencedCommit, Cases: ids}}
}

// mergeRaw adds the cases and measurements of newer to those of older:
// a case newer measured replaces older's case of the same id (all its
// measurements), the others of older are kept. Settings and environment
// are newer's; each invocation keeps the cases it still contributes.
func mergeRaw(older, newer rawResults) rawResults {
	var ids []string
	for _, c := range newer.Cases {
		ids = append(ids, c.ID)
	}
	out := newer
	out.Cases, out.Measurements, out.Invocations = nil, nil, nil
	for _, c := range older.Cases {
		if !slices.Contains(ids, c.ID) {
			out.Cases = append(out.Cases, c)
		}
	}
	out.Cases = append(out.Cases, newer.Cases...)
	for _, m := range older.Measurements {
		if !slices.Contains(ids, m.Case) {
			out.Measurements = append(out.Measurements, m)
		}
	}
	out.Measurements = append(out.Measurements, newer.Measurements...)
	for _, inv := range older.invocations() {
		inv.Cases = slices.DeleteFunc(slices.Clone(inv.Cases), func(id string) bool { return slices.Contains(ids, id) })
		if len(inv.Cases) > 0 {
			out.Invocations = append(out.Invocations, inv)
		}
	}
	out.Invocations = append(out.Invocations, newer.invocations()...)
	// Report the cases in the matrix's order.
	slices.SortStableFunc(out.Cases, func(a, b benchCase) int { return matrixIndex(a.ID) - matrixIndex(b.ID) })
	return out
}

// matrixIndex is the position of the case id in the matrix (unknown ids
// last).
func matrixIndex(id string) int {
	for i, c := range matrix {
		if c.ID == id {
			return i
		}
	}
	return len(matrix)
}

// readRaw reads a raw results file; a missing file is an empty one when
// missingOK.
func readRaw(path string, missingOK bool) (rawResults, error) {
	var raw rawResults
	b, err := os.ReadFile(path)
	if missingOK && errors.Is(err, fs.ErrNotExist) {
		return raw, nil
	}
	if err != nil {
		return raw, err
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return raw, fmt.Errorf("%s: %w", path, err)
	}
	return raw, nil
}

// commandLine is the command that measures with settings s.
func commandLine(s settings) string {
	cmd := fmt.Sprintf("go run . --duration %v --warmup %v --runs %d --ttl %v", s.Duration, s.Warmup, s.Runs, s.TTL)
	if s.ElectionTTL != 0 {
		cmd += fmt.Sprintf(" --election-ttl %v", s.ElectionTTL)
	}
	if s.Systems != "" {
		cmd += " --systems " + s.Systems
	}
	if s.Workloads != "" {
		cmd += " --workloads " + s.Workloads
	}
	if s.Keep {
		cmd += " --keep"
	}
	return cmd
}
