package server_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/server"
)

// Status and List show a caller only what it may read: the locks of other
// prefixes and the sessions that hold or wait for none of its locks are
// counted, never named (not in a page token either), a shown session
// lists only its readable locks, secrets never appear, and an Acquire
// that is not granted names the holder's session only to a reader of the
// name.
func TestAuth_ReadsFilteredByPermission(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.jsonl")
	const blindToken = "blind-token-0123456789abcdef0123456789abcdef"
	data := authLine(t, "admin", adminToken, server.AuthRole{Prefix: "", Permissions: []string{"admin", "read", "acquire"}}) +
		authLine(t, "app", appToken, server.AuthRole{Prefix: "orders/", Permissions: []string{"acquire", "read"}}, server.AuthRole{Prefix: "billing/", Permissions: []string{"acquire"}}) +
		authLine(t, "blind", blindToken, server.AuthRole{Prefix: "", Permissions: []string{"acquire"}})
	if err := os.WriteFile(authFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, func(c *server.Config) { c.AuthFile = authFile })
	ctx := context.Background()
	app, admin, blind := asIdentity(srv.Addr(), appToken), asIdentity(srv.Addr(), adminToken), asIdentity(srv.Addr(), blindToken)

	appSess, appSecret := app.session(t)
	adminSess, adminSecret := admin.session(t)
	_, bareSecret := admin.session(t) // holds nothing
	for _, n := range []string{"orders/1", "orders/2"} {
		if _, err := app.acquire(n, appSess, appSecret); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"billing/1", "billing/2", "hr/1"} {
		if _, err := admin.acquire(n, adminSess, adminSecret); err != nil {
			t.Fatal(err)
		}
	}
	// app holds orders/1 and 2; admin billing/1, billing/2, hr/1; app asks
	// for billing/1 (acquire without read): the holder is not named.
	r, err := app.acquire("billing/1", appSess, appSecret)
	if err != nil || r.Granted || r.Holder != 0 {
		t.Fatalf("app's acquire of billing/1, held by admin: %v %v, want not granted, holder not named", r, err)
	}
	if r, err := admin.acquire("orders/1", adminSess, adminSecret); err != nil || r.Holder != appSess {
		t.Fatalf("admin's acquire of orders/1: %v %v, want holder %d named", r, err, appSess)
	}

	st, err := app.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range st.Msg.Locks {
		names = append(names, l.Name)
	}
	if strings.Join(names, ",") != "orders/1,orders/2" || st.Msg.HiddenLocks != 3 {
		t.Fatalf("app's status: locks %v, %d hidden; want orders/1,orders/2 and 3 hidden", names, st.Msg.HiddenLocks)
	}
	if len(st.Msg.Sessions) != 1 || st.Msg.Sessions[0].Session != appSess || st.Msg.HiddenSessions != 2 {
		t.Fatalf("app's status: sessions %v, %d hidden; want only its own and 2 hidden", st.Msg.Sessions, st.Msg.HiddenSessions)
	}
	b, _ := protojson.Marshal(st.Msg)
	for _, leak := range []string{"billing", "hr/", appSecret, adminSecret, bareSecret} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("app's status shows %q: %s", leak, b)
		}
	}
	full, err := admin.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	if err != nil || len(full.Msg.Locks) != 5 || len(full.Msg.Sessions) != 3 || full.Msg.HiddenLocks+full.Msg.HiddenSessions != 0 {
		t.Fatalf("admin's status: %v %v, want every lock and session", full, err)
	}
	if b, _ := protojson.Marshal(full.Msg); strings.Contains(string(b), adminSecret) || strings.Contains(string(b), appSecret) {
		t.Fatalf("admin's status shows a secret: %s", b)
	}

	// List, a page of one at a time: the pages add up, and no page token
	// names a hidden lock.
	var listed []string
	hidden, token := 0, ""
	for {
		page, err := app.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Limit: 1, PageToken: token}))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Msg.Locks {
			listed = append(listed, l.Name)
		}
		hidden += int(page.Msg.HiddenLocks)
		if token = page.Msg.NextPageToken; token == "" {
			break
		}
		if raw, _ := base64.RawURLEncoding.DecodeString(token); !strings.Contains(string(raw), "orders/") {
			t.Fatalf("page token %q (%q) names no lock app may read", token, raw)
		}
	}
	if strings.Join(listed, ",") != "orders/1,orders/2" || hidden != 3 {
		t.Fatalf("app's list: %v, %d hidden; want orders/1,orders/2 and 3 hidden", listed, hidden)
	}
	if page, err := app.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{Prefix: "billing/"})); err != nil || len(page.Msg.Locks) != 0 || page.Msg.HiddenLocks != 2 {
		t.Fatalf("app lists billing/: %v %v, want no lock and 2 hidden", page, err)
	}
	// Naming a lock needs read on it; reading nothing anywhere, none.
	_, err = app.locks.Describe(ctx, connect.NewRequest(&fencedv1.DescribeRequest{Name: "billing/1"}))
	denied(t, "app describes billing/1", err, `"read"`, `"billing/1"`)
	_, err = app.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{Name: "hr/1"}))
	denied(t, "app reads the status of hr/1", err, `"read"`, `"hr/1"`)
	_, err = blind.locks.Status(ctx, connect.NewRequest(&fencedv1.StatusRequest{}))
	denied(t, "an identity without read reads the status", err, `"blind"`, `"read"`)
	_, err = blind.locks.List(ctx, connect.NewRequest(&fencedv1.ListRequest{}))
	denied(t, "an identity without read lists", err, `"blind"`, `"read"`)
}
