package server_test

import (
	"context"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func TestPages_StatusListDescribeWalkEverything(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	holder := a.session(t, 10000)
	const nLocks = 7
	for i := range nLocks {
		if _, err := a.acquire(t, fmt.Sprintf("p/%02d", i), holder, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Five waiters on p/00, queued in the background.
	var waiters []uint64
	for range 5 {
		s := a.session(t, 10000)
		waiters = append(waiters, s)
		go a.locks.Acquire(ctx, connect.NewRequest(&fencedv1.AcquireRequest{Name: "p/00", Session: s, Secret: secretOf(s), WaitMs: 5000}))
	}
	waitFor(t, "5 waiters on p/00", func() bool { return len(a.describe(t, "p/00").Waiters) == 5 })

	// Status, 3 items a page: 7 locks then 6 sessions, in 5 pages.
	var locks, sessions, pages int
	token := ""
	for {
		r, err := a.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{PageSize: 3, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if n := len(r.Msg.Locks) + len(r.Msg.Sessions); n > 3 {
			t.Fatalf("page %d has %d items, want at most 3", pages, n)
		}
		locks += len(r.Msg.Locks)
		sessions += len(r.Msg.Sessions)
		if token = r.Msg.NextPageToken; token == "" {
			break
		}
	}
	if locks != nLocks || sessions != 6 || pages != 5 {
		t.Fatalf("status pages: %d locks, %d sessions in %d pages; want 7, 6 in 5", locks, sessions, pages)
	}

	// List, 2 a page, in name order.
	var names []string
	token = ""
	for {
		r, err := a.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Prefix: "p/", Limit: 2, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range r.Msg.Locks {
			names = append(names, l.Name)
		}
		if token = r.Msg.NextPageToken; token == "" {
			break
		}
	}
	if len(names) != nLocks || names[0] != "p/00" || names[nLocks-1] != "p/06" {
		t.Fatalf("listed %v", names)
	}

	// Describe pages through the waiters in queue order.
	var got []uint64
	token = ""
	for {
		r, err := a.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "p/00", PageSize: 2, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		if r.Msg.Lock.WaiterCount != 5 || len(r.Msg.Lock.Waiters) > 2 {
			t.Fatalf("describe page: %d waiters of %d", len(r.Msg.Lock.Waiters), r.Msg.Lock.WaiterCount)
		}
		for _, w := range r.Msg.Lock.Waiters {
			got = append(got, w.Session)
		}
		if token = r.Msg.NextPageToken; token == "" {
			break
		}
	}
	seen := map[uint64]bool{}
	for _, s := range got {
		seen[s] = true
	}
	for _, s := range waiters {
		if !seen[s] || len(got) != len(waiters) {
			t.Fatalf("waiters %v, want each of %v once", got, waiters)
		}
	}

	// Bad page sizes and tokens are refused.
	for _, req := range []*fencedv1.StatusRequest{{PageSize: 1001}, {PageSize: -1}, {PageToken: "!!"}, {PageToken: "dw"}} {
		if _, err := a.locks.Status(ctx, connect.NewRequest(req)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("Status(%v): %v, want InvalidArgument", req, err)
		}
	}
}
