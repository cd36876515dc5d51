package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/testserver"
	"github.com/fenced-dev/fenced/server"
)

// WithBearerToken sends the token on every call: the session is created,
// renewed on the KeepAlive stream past several TTLs, and its locks go
// through the Pipeline; a name outside the identity's prefix is refused
// with fence.ErrPermissionDenied; a Client without the token is refused.
func TestWithBearerToken(t *testing.T) {
	const token = "sdk-token-0123456789abcdef0123456789abcdef"
	sum := sha256.Sum256([]byte(token))
	file := filepath.Join(t.TempDir(), "auth.jsonl")
	line := `{"name":"app","sha256":"` + hex.EncodeToString(sum[:]) + `","roles":[{"prefix":"orders/","permissions":["acquire","read"]}]}`
	if err := os.WriteFile(file, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *server.Config) { c.AuthFile = file })
	ctx := testCtx(t)

	anon := newClient(t, []string{srv.Addr()})
	if _, err := anon.NewSession(ctx); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("NewSession without a token: %v, want Unauthenticated", err)
	}

	c := newClient(t, []string{srv.Addr()}, client.WithBearerToken(token))
	s := newSession(t, c, client.WithTTL(time.Second))
	m := client.NewMutex(s, "orders/a")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock orders/a: %v", err)
	}
	err := client.NewMutex(s, "billing/x").TryLock(ctx)
	if !errors.Is(err, fence.ErrPermissionDenied) {
		t.Fatalf("TryLock billing/x: %v, want ErrPermissionDenied", err)
	}
	select {
	case <-s.Done():
		t.Fatal("the session was lost: its renewals did not carry the token")
	case <-time.After(3 * time.Second):
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after three TTLs: %v", err)
	}
}
