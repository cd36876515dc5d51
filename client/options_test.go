package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// Options out of range are refused before anything is sent, with the
// allowed range in the message; durations that would overflow when added
// to a wait are among them.
func TestOptions_OutOfRange(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, 1 << 62} {
		_, err := client.New([]string{"127.0.0.1:1"}, client.WithRequestTimeout(d))
		if !errors.Is(err, fence.ErrInvalidArgument) || !strings.Contains(err.Error(), "request timeout must be between 1ns and 24h0m0s") {
			t.Errorf("WithRequestTimeout(%v): %v, want ErrInvalidArgument with the range", d, err)
		}
	}
	c, err := client.New([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, ttl := range []time.Duration{0, 99 * time.Millisecond, 24*time.Hour + time.Millisecond, 1 << 62} {
		_, err := c.NewSession(ctx, client.WithTTL(ttl))
		if !errors.Is(err, fence.ErrInvalidArgument) || !strings.Contains(err.Error(), "ttl must be between 100ms and 24h") {
			t.Errorf("NewSession(WithTTL(%v)): %v, want ErrInvalidArgument with the range", ttl, err)
		}
		if _, err := c.Acquire(ctx, "x", ttl); !errors.Is(err, fence.ErrInvalidArgument) {
			t.Errorf("Acquire(ttl %v): %v, want ErrInvalidArgument", ttl, err)
		}
	}
}
