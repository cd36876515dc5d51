//go:build race

package client_test

// raceAllocs is what the race detector adds to an allocation budget of an
// SDK cycle: its sync.Pool drops some of what is put back (the pipeline's
// answer channels, Connect's buffers), so those are made anew.
const raceAllocs = 5
