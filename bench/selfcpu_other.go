//go:build !unix

package bench

import "time"

// selfCPU reports false: this platform's process CPU time is not read.
func selfCPU() (time.Duration, bool) { return 0, false }
