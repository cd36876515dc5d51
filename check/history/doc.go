// Package history is what a run of the fault harness records: one Op per
// client operation, injected fault and committed server event, written
// and read as JSON lines. The harness (package check) writes histories,
// the checkers (package checker) and the report (package report) read
// them.
package history
