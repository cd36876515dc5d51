package check

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

// The deck deals every enabled kind once before it repeats one, for any
// seed; later rounds deal pause-client once more.
func TestDeck_EveryKindBeforeARepeat(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		d := &deck{rng: rand.New(rand.NewPCG(seed, 0xfa17)), kinds: history.AllFaults}
		var first []string
		for range history.AllFaults {
			first = append(first, d.next())
		}
		got := slices.Sorted(slices.Values(first))
		want := slices.Sorted(slices.Values(history.AllFaults))
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: first round %v, want each of %v once", seed, first, want)
		}
		pauses := 0
		for range len(history.AllFaults) + 1 {
			if d.next() == history.FaultPauseClient {
				pauses++
			}
		}
		if pauses != 2 {
			t.Fatalf("seed %d: second round dealt pause-client %d times, want 2", seed, pauses)
		}
	}
	one := &deck{rng: rand.New(rand.NewPCG(1, 1)), kinds: []string{history.FaultKill}}
	for range 5 {
		if k := one.next(); k != history.FaultKill {
			t.Fatalf("a one-kind deck dealt %s", k)
		}
	}
}
