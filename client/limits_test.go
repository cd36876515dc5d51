package client_test

import (
	"errors"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

func TestLimits_SessionQuotaIsErrLimitExceeded(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.MaxSessionsPerSource = 1 })
	c := newClient(t, []string{srv.Addr()})
	newSession(t, c)
	if _, err := c.NewSession(testCtx(t)); !errors.Is(err, fence.ErrLimitExceeded) {
		t.Fatalf("second NewSession: %v, want ErrLimitExceeded", err)
	}
}

func TestLimits_GrantQuotaOnThePipelineIsErrLimitExceeded(t *testing.T) {
	srv := testserver.Start(t, func(c *server.Config) { c.Limits.MaxGrantsPerSource = 1 })
	c := newClient(t, []string{srv.Addr()})
	s := newSession(t, c)
	if err := client.NewMutex(s, "first").Lock(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(s, "second").Lock(testCtx(t)); !errors.Is(err, fence.ErrLimitExceeded) {
		t.Fatalf("second Lock: %v, want ErrLimitExceeded", err)
	}
}
