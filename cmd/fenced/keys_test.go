package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// fetchKeys reads a member's GET /.well-known/fenced-keys, with no
// credentials, and loads it.
func fetchKeys(t *testing.T, addr string) (*fence.KeySet, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/.well-known/fenced-keys")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status + " " + string(body))
	}
	return fence.LoadKeySet(body)
}

// A real 3-node cluster: the keys a follower publishes verify a grant the
// leader signed; `fenced keys rotate` through a follower reaches every
// member; a grant signed before the rotation still verifies with the new
// key set, one signed after needs it, and guard.Signed refuses the new
// grant for any object outside its scope.
func TestKeys_ThreeNodeRotation(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	_, followers := leaderOf(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New([]string{followers[0].Addr}, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acquire := func(name string) fence.Grant {
		t.Helper()
		l, err := c.Acquire(ctx, name, 30*time.Second)
		if err != nil {
			t.Fatalf("acquire %s: %v", name, err)
		}
		g := l.Grant()
		if g.Signed == "" {
			t.Fatalf("grant %+v is not signed", g)
		}
		return g
	}
	before := acquire("orders")
	var ks0 *fence.KeySet
	eventually(t, "a follower to publish the bootstrap key", 30*time.Second, func() bool {
		ks0, err = fetchKeys(t, followers[1].Addr)
		return err == nil && len(ks0.Keys()) == 1
	})
	if _, err := ks0.VerifyGrant(before.Signed); err != nil {
		t.Fatalf("the follower's keys do not verify the leader's grant: %v", err)
	}
	sdkKeys, err := c.SigningKeys(ctx)
	if err != nil || sdkKeys.Current() != ks0.Current() || sdkKeys.Issuer() != before.Issuer {
		t.Fatalf("client.SigningKeys=%v, %v; want the published set of issuer %s", sdkKeys, err, before.Issuer)
	}

	out, errOut, code := runFenced(t, "keys", "rotate", "--reason", "scheduled", "--json", "--endpoints", followers[1].Addr)
	var rot struct {
		Key     string   `json:"key"`
		Dropped []string `json:"dropped"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rot) != nil || rot.Key == "" || rot.Key == ks0.Current() {
		t.Fatalf("keys rotate: exit %d %q %s", code, out, errOut)
	}
	sets := make([]*fence.KeySet, len(servers))
	for i, s := range servers {
		eventually(t, "member "+s.NodeID+" to publish the rotated key", 30*time.Second, func() bool {
			sets[i], err = fetchKeys(t, s.Addr)
			return err == nil && sets[i].Current() == rot.Key && len(sets[i].Keys()) == 2
		})
		if _, err := sets[i].VerifyGrant(before.Signed); err != nil {
			t.Fatalf("member %s: a grant signed before the rotation: %v", s.NodeID, err)
		}
	}
	after := acquire("payments")
	sg, err := sets[2].VerifyGrant(after.Signed)
	if err != nil || sg.KeyID != rot.Key || sg.Scope != "payments" || sg.Token != after.Token {
		t.Fatalf("a grant after the rotation: %+v, %v; want signed by %s for payments", sg, err, rot.Key)
	}
	if _, err := ks0.VerifyGrant(after.Signed); !errors.Is(err, fence.ErrInvalidGrant) {
		t.Fatalf("keys fetched before the rotation verified the new key's grant: %v", err)
	}

	var mem guard.Memory
	g := guard.Signed(&mem, sets[1])
	write := func(gr fence.Grant, object string) error {
		return g.Do(guard.ContextWithGrant(ctx, gr.Signed), object, gr.Token, nil)
	}
	if err := write(after, "payments/7"); err != nil {
		t.Fatalf("the grant of payments writing payments/7: %v", err)
	}
	if err := write(after, "orders/7"); !errors.Is(err, fence.ErrInvalidGrant) {
		t.Fatalf("the grant of payments writing orders/7: %v, want fence.ErrInvalidGrant", err)
	}
	if err := write(before, "orders/7"); err != nil {
		t.Fatalf("the pre-rotation grant of orders writing orders/7: %v", err)
	}
	list, _, code := runFenced(t, "keys", "list", "--endpoints", proctest.Endpoints(servers))
	if code != 0 || !strings.Contains(list, rot.Key) || !strings.Contains(list, ks0.Current()) {
		t.Fatalf("keys list: exit %d %q", code, list)
	}
}
