package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
	"github.com/fenced-dev/fenced/server"
)

// wellKnownKeys fetches and loads a member's published keys, with no
// credentials.
func wellKnownKeys(t *testing.T, addr string) *fence.KeySet {
	t.Helper()
	resp, err := http.Get("http://" + addr + server.WellKnownKeysPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %q", server.WellKnownKeysPath, resp.Status, body)
	}
	ks, err := fence.LoadKeySet(body)
	if err != nil {
		t.Fatalf("LoadKeySet(%s): %v", body, err)
	}
	return ks
}

// verified verifies g's signed grant with ks and checks it is g's.
func verified(t *testing.T, ks *fence.KeySet, g *fencedv1.Grant) fence.SignedGrant {
	t.Helper()
	sg, err := ks.VerifyGrant(g.GetSigned())
	if err != nil {
		t.Fatalf("grant %v: VerifyGrant: %v", g, err)
	}
	if sg.Token != fence.Token(g.Token) || sg.Scope != g.Scope || sg.Scope != g.Name || sg.Kind != fence.Kind(g.Kind) || sg.Kind != fence.KindLock || sg.Issuer != g.Issuer || sg.IssuedAt.UnixMilli() != g.IssuedAtUnixMs {
		t.Fatalf("signed grant %+v does not match the grant %v", sg, g)
	}
	return sg
}

// TestKeys_GrantsSignedForTheirHolderOnly: the grant an acquire (or a
// pushed waiter) receives is signed by the published key over its scope
// and token; the grant Describe shows to others carries no signature.
func TestKeys_GrantsSignedForTheirHolderOnly(t *testing.T) {
	a := newAPI(t)
	ks := wellKnownKeys(t, a.addr)
	if len(ks.Keys()) != 1 || ks.Current() != ks.Keys()[0].ID {
		t.Fatalf("a new cluster publishes %d keys (current %q), want its bootstrap key", len(ks.Keys()), ks.Current())
	}
	s1, s2 := a.session(t, 30000), a.session(t, 30000)
	r1, err := a.acquire(t, "orders", s1, 1, 0)
	if err != nil || !r1.Granted {
		t.Fatalf("acquire: %v %v", r1, err)
	}
	verified(t, ks, r1.Grant)
	if h := a.describe(t, "orders").GetHolder(); h.GetSigned() != "" || h.GetToken() != r1.Grant.Token {
		t.Fatalf("Describe's holder %v carries a signed grant", h)
	}
	done := make(chan *fencedv1.AcquireResponse, 1)
	go func() {
		r, err := a.acquire(t, "orders", s2, 1, 30000)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitFor(t, "the waiter to queue", func() bool { return len(a.describe(t, "orders").Waiters) == 1 })
	if _, err := a.locks.Release(context.Background(), connect.NewRequest(&fencedv1.ReleaseRequest{Name: "orders", Session: s1, Secret: secretOf(s1), Seq: 2})); err != nil {
		t.Fatal(err)
	}
	r2 := <-done
	if !r2.GetGranted() {
		t.Fatalf("the waiter was not granted: %v", r2)
	}
	if sg := verified(t, ks, r2.Grant); sg.Token <= fence.Token(r1.Grant.Token) {
		t.Fatalf("pushed grant's token %d is not above %d", sg.Token, r1.Grant.Token)
	}
}

// TestKeys_GrantsSignedTogether: grants handed out at the same time are
// signed in batches (Config.SignBatchMax), each verifying with the
// published keys as its own holder's grant, none another's; with
// SignBatchMax 1 every grant is signed alone.
func TestKeys_GrantsSignedTogether(t *testing.T) {
	for _, limit := range []int{0, 1} {
		a := newAPI(t, func(c *server.Config) { c.SignBatchMax = limit })
		ks := wellKnownKeys(t, a.addr)
		const lockers = 24
		sessions := make([]uint64, lockers)
		for i := range sessions {
			sessions[i] = a.session(t, 30000)
		}
		batched, handed := 0, 0
		for round := 1; round <= 20 && (limit == 1 || batched == 0); round++ {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i, s := range sessions {
				wg.Go(func() {
					name := fmt.Sprintf("together/%d/%d", round, i)
					r, err := a.acquire(t, name, s, uint64(2*round), 0)
					if err != nil || !r.GetGranted() || r.Grant.Name != name {
						t.Errorf("acquire %s: %v %v", name, r, err)
						return
					}
					sg := verified(t, ks, r.Grant)
					mu.Lock()
					handed++
					if sg.Batch != nil {
						batched++
					}
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		grants, signatures := metric(t, a.addr, "fenced_signed_grants_total"), metric(t, a.addr, "fenced_grant_signatures_total")
		if grants != strconv.Itoa(handed) {
			t.Errorf("SignBatchMax %d: fenced_signed_grants_total %s, want the %d grants handed out", limit, grants, handed)
		}
		if n, _ := strconv.Atoi(signatures); limit == 1 && n != handed || limit != 1 && (n < 1 || n >= handed) {
			t.Errorf("SignBatchMax %d: fenced_grant_signatures_total %s for %d grants (%d batched)", limit, signatures, handed, batched)
		}
		switch {
		case limit == 1 && batched > 0:
			t.Errorf("SignBatchMax 1: %d grants signed in batches", batched)
		case limit == 0 && batched == 0:
			t.Errorf("SignBatchMax default: 20 rounds of %d acquires at once, no grant signed in a batch", lockers)
		}
	}
}

// TestKeys_SignGrantsOff: with SignGrants off the grant has no signature;
// the keys are still published.
func TestKeys_SignGrantsOff(t *testing.T) {
	a := newAPI(t, func(c *server.Config) { c.SignGrants = false })
	s := a.session(t, 30000)
	r, err := a.acquire(t, "orders", s, 1, 0)
	if err != nil || !r.Granted || r.Grant.Signed != "" {
		t.Fatalf("acquire with signing off: %v %v", r, err)
	}
	if ks := wellKnownKeys(t, a.addr); len(ks.Keys()) != 1 {
		t.Fatalf("%d keys published with signing off, want 1", len(ks.Keys()))
	}
}

// TestKeys_RotateAdminOnlyAndAudited: only admin rotates, the rotation is
// audited, the new key signs from then on, a grant signed before stays
// verifiable while its key is kept, and keep 1 withdraws it.
func TestKeys_RotateAdminOnlyAndAudited(t *testing.T) {
	srv, _, auditFile := startAuth(t)
	app, admin := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), adminToken)
	appKeys := fencedv1connect.NewKeyServiceClient(app.hc, app.base)
	adminKeys := fencedv1connect.NewKeyServiceClient(admin.hc, admin.base)
	ctx := context.Background()

	sess, secret := app.session(t)
	before, err := app.acquire("orders/1", sess, secret)
	if err != nil {
		t.Fatal(err)
	}
	ks0 := wellKnownKeys(t, srv.Addr())
	old := verified(t, ks0, before.Grant)

	_, err = appKeys.RotateKeys(ctx, connect.NewRequest(&fencedv1.RotateKeysRequest{Reason: "app tries"}))
	denied(t, "app rotates the keys", err, `"app"`, `"admin"`)
	if ks := wellKnownKeys(t, srv.Addr()); ks.Current() != ks0.Current() || len(ks.Keys()) != 1 {
		t.Fatal("a denied rotation changed the keys")
	}
	for _, keep := range []uint32{17, 1000} {
		if _, err := adminKeys.RotateKeys(ctx, connect.NewRequest(&fencedv1.RotateKeysRequest{Keep: keep})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("RotateKeys(keep %d)=%v, want InvalidArgument", keep, err)
		}
	}

	rot, err := adminKeys.RotateKeys(ctx, connect.NewRequest(&fencedv1.RotateKeysRequest{Reason: "scheduled"}))
	if err != nil {
		t.Fatal(err)
	}
	if rot.Msg.Key.GetId() == "" || rot.Msg.Key.Id == old.KeyID || len(rot.Msg.Dropped) != 0 {
		t.Fatalf("RotateKeys=%v", rot.Msg)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "admin", "identity": "admin", "procedure": fencedv1connect.KeyServiceRotateKeysProcedure, "outcome": "ok", "detail": "keep 3: scheduled"}) {
		t.Fatal("the rotation is not in the audit log")
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "denied", "identity": "app", "procedure": fencedv1connect.KeyServiceRotateKeysProcedure}) {
		t.Fatal("the refused rotation is not in the audit log")
	}
	list, err := appKeys.ListKeys(ctx, connect.NewRequest(&fencedv1.ListKeysRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Msg.Keys) != 2 || list.Msg.Current != rot.Msg.Key.Id || list.Msg.Keys[1].Id != rot.Msg.Key.Id || list.Msg.Keys[0].Id != old.KeyID {
		t.Fatalf("ListKeys=%v, want the old key then the new one", list.Msg)
	}
	ks1 := wellKnownKeys(t, srv.Addr())
	verified(t, ks1, before.Grant) // signed before the rotation
	sess2, secret2 := app.session(t)
	after, err := app.acquire("orders/2", sess2, secret2)
	if err != nil {
		t.Fatal(err)
	}
	if sg := verified(t, ks1, after.Grant); sg.KeyID != rot.Msg.Key.Id {
		t.Fatalf("a grant after the rotation is signed by %s, want the new key %s", sg.KeyID, rot.Msg.Key.Id)
	}
	if _, err := ks0.VerifyGrant(after.Grant.Signed); !errors.Is(err, fence.ErrInvalidGrant) {
		t.Fatalf("keys fetched before the rotation verified a grant of the new key: %v", err)
	}

	// keep 1: every earlier key withdrawn at once.
	rot2, err := adminKeys.RotateKeys(ctx, connect.NewRequest(&fencedv1.RotateKeysRequest{Keep: 1, Reason: "leaked"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rot2.Msg.Dropped) != 2 {
		t.Fatalf("keep 1 dropped %v, want both earlier keys", rot2.Msg.Dropped)
	}
	ks2 := wellKnownKeys(t, srv.Addr())
	for _, g := range []*fencedv1.Grant{before.Grant, after.Grant} {
		if _, err := ks2.VerifyGrant(g.Signed); !errors.Is(err, fence.ErrInvalidGrant) {
			t.Fatalf("a grant of a withdrawn key verified: %v", err)
		}
	}
}
