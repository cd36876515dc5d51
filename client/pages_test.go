package client_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func TestPages_StatusAndLocksFollowEveryPage(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, []string{srv.Addr()})
	ctx := testCtx(t)
	api := lockAPI(srv.Addr())
	sr, err := sessionAPI(srv.Addr()).CreateSession(ctx, connect.NewRequest(&fencedv1.CreateSessionRequest{TtlMs: 60000}))
	if err != nil {
		t.Fatal(err)
	}
	// More locks than one page holds (1000).
	const n = 1005
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				_, err := api.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: fmt.Sprintf("pg/%04d", i), Session: sr.Msg.Session, Secret: sr.Msg.Secret}))
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	var names []string
	for l, err := range c.Locks(ctx, "pg/") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, l.Name)
	}
	if len(names) != n || names[0] != "pg/0000" || names[n-1] != fmt.Sprintf("pg/%04d", n-1) {
		t.Fatalf("Locks: %d names (%v ... ), want %d in order", len(names), names[:3], n)
	}

	st, err := c.Status(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Locks) != n || len(st.Sessions) != 1 || st.NextPageToken != "" {
		t.Fatalf("Status: %d locks, %d sessions, next %q; want %d, 1, none", len(st.Locks), len(st.Sessions), st.NextPageToken, n)
	}
	first, err := c.StatusPage(ctx, "", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Locks) != 10 || first.NextPageToken == "" {
		t.Fatalf("StatusPage(10): %d locks, next %q", len(first.Locks), first.NextPageToken)
	}
	if _, err := c.StatusPage(ctx, "", 1001, ""); !errors.Is(err, fence.ErrInvalidArgument) {
		t.Fatalf("StatusPage(1001): %v, want ErrInvalidArgument", err)
	}
}
