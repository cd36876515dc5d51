//go:build !race

package client_test

// raceAllocs is 0 without the race detector (race_allocs_test.go).
const raceAllocs = 0
