//go:build race

package server_test

// raceAllocs is what the race detector adds to an allocation budget of a
// whole call: its sync.Pool drops some of the items put back.
const raceAllocs = 8
