package httpfence_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/guard/guardtest"
	"github.com/fenced-dev/fenced/httpfence"
)

// TestSigned_Header: behind guard.Signed a write needs the signed grant
// in X-Fencing-Grant (WithGrant sends it); a grant of another scope, none,
// or two are answered 403 invalid-grant (the Transport's error matches
// fence.ErrInvalidGrant) and nothing is written. Without Signed, plain
// X-Fencing-Token keeps working, with or without the grant header.
func TestSigned_Header(t *testing.T) {
	is := guardtest.NewIssuer("cluster-a", 8)
	var mem guard.Memory
	writes := 0
	newSrv := func(g fence.Guard) *httptest.Server {
		mw, err := httpfence.New(httpfence.Config{Guard: g, Mode: guard.AroundHandler})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writes++
			w.WriteHeader(http.StatusNoContent)
		})))
		t.Cleanup(srv.Close)
		return srv
	}
	signed := newSrv(guard.Signed(&mem, is.Keys()))
	hc := &http.Client{Transport: &httpfence.Transport{}}
	put := func(ctx context.Context, url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, nil)
		return hc.Do(req)
	}
	ctx := context.Background()
	grant := fence.Grant{Name: "orders", Token: 5, Issuer: is.ID, Signed: is.Sign(t, "orders", 5)}
	resp, err := put(httpfence.WithGrant(ctx, "orders/17", grant), signed.URL+"/x")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a write with its signed grant: %v %v", resp, err)
	}
	resp.Body.Close()
	for name, c := range map[string]context.Context{
		"grant of scope b for object a": httpfence.WithGrant(ctx, "orders/17", fence.Grant{Token: 6, Issuer: is.ID, Signed: is.Sign(t, "billing", 6)}),
		"no grant":                      httpfence.WithToken(ctx, "orders/17", 6),
	} {
		if _, err := put(c, signed.URL+"/x"); !errors.Is(err, fence.ErrInvalidGrant) {
			t.Errorf("%s: %v, want fence.ErrInvalidGrant", name, err)
		}
	}
	// Two grant headers, sent by hand: refused, never resolved to one.
	req, _ := http.NewRequest(http.MethodPut, signed.URL+"/x", nil)
	req.Header.Set(httpfence.HeaderToken, "6")
	req.Header.Set(httpfence.HeaderResourceID, "orders/17")
	req.Header.Add(httpfence.HeaderGrant, is.Sign(t, "orders", 6))
	req.Header.Add(httpfence.HeaderGrant, is.Sign(t, "orders", 6))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(httpfence.HeaderError) != httpfence.ReasonInvalidGrant {
		t.Fatalf("two X-Fencing-Grant headers: %s %q, want 403 invalid-grant", resp.Status, resp.Header.Get(httpfence.HeaderError))
	}
	if writes != 1 || mem.Watermark("orders/17") != 5 {
		t.Fatalf("%d writes, watermark %d after the attacks; want 1 and 5", writes, mem.Watermark("orders/17"))
	}

	var plainMem guard.Memory
	plain := newSrv(&plainMem)
	for _, c := range []context.Context{httpfence.WithToken(ctx, "p", 3), httpfence.WithGrant(ctx, "p", grant)} {
		resp, err := put(c, plain.URL+"/p")
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a write to a resource without Signed: %v %v", resp, err)
		}
		resp.Body.Close()
	}
}
