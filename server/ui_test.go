package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// uiView is the part of a dashboard view the tests read.
type uiView struct {
	Node    string `json:"node"`
	Cluster struct {
		Leader  string `json:"leader"`
		Members []struct {
			ID string `json:"id"`
			Up bool   `json:"up"`
		} `json:"members"`
	} `json:"cluster"`
	Locks []struct {
		Name   string `json:"name"`
		Holder *struct {
			Session uint64 `json:"session"`
			Token   uint64 `json:"token"`
		} `json:"holder"`
		Waiters []uint64 `json:"waiters"`
	} `json:"locks"`
	Semaphores []struct {
		Name    string `json:"name"`
		Permits []struct {
			Session uint64 `json:"session"`
		} `json:"permits"`
	} `json:"semaphores"`
	RWLocks []struct {
		Name    string `json:"name"`
		Readers []struct {
			Session uint64 `json:"session"`
		} `json:"readers"`
	} `json:"rwlocks"`
	Elections []struct {
		Name   string `json:"name"`
		Value  string `json:"value"`
		Leader *struct {
			Session uint64 `json:"session"`
		} `json:"leader"`
	} `json:"elections"`
	Sessions []struct {
		ID             uint64 `json:"id"`
		SinceRenewalMs *int64 `json:"since_renewal_ms"`
	} `json:"sessions"`
	Hidden   int `json:"hidden"`
	Timeline []struct {
		Event string `json:"event"`
		Name  string `json:"name"`
		Token uint64 `json:"token"`
	} `json:"timeline"`
}

func snapshot(t *testing.T, hc *http.Client, addr, query string) (uiView, int) {
	t.Helper()
	resp, err := hc.Get("http://" + addr + "/ui/api/snapshot" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v uiView
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return v, resp.StatusCode
}

// One view shows every primitive in use: a lock with its holder and
// waiter, a semaphore's permit, a read grant, an election's leader and
// value, the sessions with the time since their renewal, and the
// timeline; a prefix narrows it to the names under it.
func TestUISnapshot_EveryPrimitive(t *testing.T) {
	a := newAPI(t)
	ctx := context.Background()
	hc := &http.Client{Transport: a.counter}
	s1, s2 := a.session(t, 30000), a.session(t, 30000)
	g, err := a.acquire(t, "orders/1", s1, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	go a.acquire(t, "orders/1", s2, 1, 20000)
	base := "http://" + a.addr
	sem := fencedv1connect.NewSemaphoreServiceClient(hc, base)
	if _, err := sem.Acquire(ctx, connect.NewRequest(&fencedv1.SemaphoreAcquireRequest{Name: "pool/db", Capacity: 2, Session: s1, Secret: secretOf(s1), Seq: 2})); err != nil {
		t.Fatal(err)
	}
	rw := fencedv1connect.NewRWLockServiceClient(hc, base)
	if _, err := rw.Acquire(ctx, connect.NewRequest(&fencedv1.RWAcquireRequest{Name: "config/main", Mode: fencedv1.RWLockMode_RW_LOCK_MODE_READ, Session: s1, Secret: secretOf(s1), Seq: 3})); err != nil {
		t.Fatal(err)
	}
	el := fencedv1connect.NewElectionServiceClient(hc, base)
	if _, err := el.Campaign(ctx, connect.NewRequest(&fencedv1.CampaignRequest{Name: "orders/leader", Session: s1, Secret: secretOf(s1), Seq: 4, Value: []byte("node-a")})); err != nil {
		t.Fatal(err)
	}
	var v uiView
	waitFor(t, "waiter in the view", func() bool {
		v, _ = snapshot(t, hc, a.addr, "")
		return len(v.Locks) == 1 && len(v.Locks[0].Waiters) == 1
	})
	if l := v.Locks[0]; l.Name != "orders/1" || l.Holder == nil || l.Holder.Session != s1 || l.Holder.Token != g.Grant.Token || l.Waiters[0] != s2 {
		t.Errorf("lock %+v, want orders/1 held by %d with token %d, waiter %d", l, s1, g.Grant.Token, s2)
	}
	if len(v.Semaphores) != 1 || len(v.Semaphores[0].Permits) != 1 || v.Semaphores[0].Permits[0].Session != s1 {
		t.Errorf("semaphores %+v", v.Semaphores)
	}
	if len(v.RWLocks) != 1 || len(v.RWLocks[0].Readers) != 1 {
		t.Errorf("rwlocks %+v", v.RWLocks)
	}
	if len(v.Elections) != 1 || v.Elections[0].Leader == nil || v.Elections[0].Value != "node-a" {
		t.Errorf("elections %+v", v.Elections)
	}
	if len(v.Sessions) != 2 || v.Sessions[0].SinceRenewalMs == nil {
		t.Errorf("sessions %+v, want 2 with the time since renewal (leader)", v.Sessions)
	}
	if len(v.Cluster.Members) != 1 || !v.Cluster.Members[0].Up || v.Cluster.Leader != v.Node {
		t.Errorf("cluster %+v", v.Cluster)
	}
	if len(v.Timeline) == 0 || v.Timeline[0].Event != "grant" || v.Timeline[0].Token != g.Grant.Token {
		t.Errorf("timeline %+v, want the first grant first", v.Timeline)
	}

	v, _ = snapshot(t, hc, a.addr, "?prefix=orders/")
	if len(v.Locks) != 1 || len(v.Elections) != 1 || len(v.Semaphores) != 0 || len(v.RWLocks) != 0 {
		t.Errorf("prefix orders/: %d locks, %d elections, %d semaphores, %d rwlocks; want 1, 1, 0, 0", len(v.Locks), len(v.Elections), len(v.Semaphores), len(v.RWLocks))
	}
	for _, e := range v.Timeline {
		if !strings.HasPrefix(e.Name, "orders/") {
			t.Errorf("prefix orders/: the timeline shows %+v", e)
		}
	}
	if _, code := snapshot(t, hc, a.addr, "?prefix="+strings.Repeat("x", 1000)); code != http.StatusBadRequest {
		t.Errorf("a prefix longer than a name: %d, want 400", code)
	}
}

// With an auth file a view needs a token with read, and holds only what
// the token may read; the rest is counted as hidden.
func TestUISnapshot_AuthFilters(t *testing.T) {
	srv, _, _ := startAuth(t)
	admin := asIdentity(srv.Addr(), adminToken)
	s, secret := admin.session(t)
	for _, name := range []string{"orders/1", "billing/1"} {
		if _, err := admin.acquire(name, s, secret); err != nil {
			t.Fatal(err)
		}
	}
	if _, code := snapshot(t, asIdentity(srv.Addr(), "").hc, srv.Addr(), ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	if _, code := snapshot(t, asIdentity(srv.Addr(), "wrong-token-0123456789abcdef0123456789abcdef").hc, srv.Addr(), ""); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", code)
	}
	v, code := snapshot(t, asIdentity(srv.Addr(), readerToken).hc, srv.Addr(), "")
	if code != http.StatusOK || len(v.Locks) != 1 || v.Locks[0].Name != "orders/1" || v.Hidden == 0 {
		t.Fatalf("reader: %d, locks %+v, hidden %d; want orders/1 only and something hidden", code, v.Locks, v.Hidden)
	}
	for _, e := range v.Timeline {
		if !strings.HasPrefix(e.Name, "orders/") {
			t.Fatalf("reader's timeline shows %+v", e)
		}
	}
	resp, err := http.Get("http://" + srv.Addr() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the static page needs no token: %s", resp.Status)
	}
}

// The event stream sends a view after each change, well before the
// once-a-second cluster refresh would.
func TestUIEvents_PushedOnChange(t *testing.T) {
	a := newAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+"/ui/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	views := make(chan uiView, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v uiView
				if json.Unmarshal([]byte(data), &v) == nil {
					views <- v
				}
			}
		}
		close(views)
	}()
	<-views
	s := a.session(t, 30000)
	for i, name := range []string{"push/a", "push/b", "push/c"} {
		start := time.Now()
		if _, err := a.acquire(t, name, s, uint64(i+1), 0); err != nil {
			t.Fatal(err)
		}
		for seen := false; !seen; {
			select {
			case v, ok := <-views:
				if !ok {
					t.Fatal("stream ended")
				}
				for _, l := range v.Locks {
					seen = seen || l.Name == name
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no view with %s within 10s", name)
			}
		}
		// A loaded machine may add scheduling delay; the cluster refresh
		// alone would take up to 1s for each of three changes.
		if d := time.Since(start); d > 900*time.Millisecond {
			t.Errorf("%s shown %v after its grant", name, d)
		}
	}
}
