package check

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// FaultsBuildTag is the build tag of a test build of fenced. The harness
// runs only such a binary: its nodes need the fault hooks that a
// production build lacks (the per-link dial hook behind partitions, the
// skewed lease clock, the negative controls).
const FaultsBuildTag = "fencedfaults"

// ErrNotFaultsBuild reports a fenced binary built without FaultsBuildTag.
var ErrNotFaultsBuild = errors.New("check: fenced is not a test build")

// requireFaultsBuild returns an error matching ErrNotFaultsBuild unless bin
// was built with FaultsBuildTag (read from the build info Go embeds in
// every binary).
func requireFaultsBuild(bin string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("check: read the build info of %s: %w", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), FaultsBuildTag) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s was built without -tags %s, so its nodes lack the fault hooks the harness injects faults and negative controls with; build it with: go build -tags %s -o fenced ./cmd/fenced",
		ErrNotFaultsBuild, bin, FaultsBuildTag, FaultsBuildTag)
}
