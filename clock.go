package fence

import "time"

// Clock is the time source of the server's lease loop and the SDK's
// validity measurement. Tests substitute a fake.
type Clock interface {
	// Now returns the current time with its monotonic reading.
	Now() time.Time
}

// SystemClock is the Clock of the running machine.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }
