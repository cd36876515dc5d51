package server_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/testserver"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// With an auth file, only admin saves a snapshot (the whole state holds
// the signing keys and every session's secret hash); both the refusal and
// the save are audited. Lineage needs read somewhere.
func TestSnapshot_SaveNeedsAdminAndIsAudited(t *testing.T) {
	srv, _, auditFile := startAuth(t)
	ctx := context.Background()
	save := func(token string) (*connect.Response[fencedv1.SaveSnapshotResponse], error) {
		a := asIdentity(srv.Addr(), token)
		return fencedv1connect.NewSnapshotServiceClient(a.hc, a.base).Save(ctx, connect.NewRequest(&fencedv1.SaveSnapshotRequest{}))
	}
	for _, tok := range []string{"", readerToken, appToken} {
		_, err := save(tok)
		if tok == "" {
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("save without a token: %v, want Unauthenticated", err)
			}
			continue
		}
		denied(t, "save by a non-admin", err, "admin")
	}
	resp, err := save(adminToken)
	if err != nil {
		t.Fatalf("save by admin: %v", err)
	}
	info := resp.Msg.GetInfo()
	if sum := sha256.Sum256(resp.Msg.GetState()); string(sum[:]) != string(info.GetStateSha256()) || info.GetIssuer() == "" || info.GetIndex() == 0 {
		t.Fatalf("snapshot info %+v does not describe its state", info)
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"event": "denied", "identity": "app", "procedure": fencedv1connect.SnapshotServiceSaveProcedure, "outcome": "refused"}) {
		t.Fatal("the refused save is not in the audit log")
	}
	if !testserver.AuditHas(t, auditFile, map[string]string{"identity": "admin", "procedure": fencedv1connect.SnapshotServiceSaveProcedure, "outcome": "ok"}) {
		t.Fatal("the save is not in the audit log")
	}
	a := asIdentity(srv.Addr(), readerToken)
	lin, err := fencedv1connect.NewSnapshotServiceClient(a.hc, a.base).Lineage(ctx, connect.NewRequest(&fencedv1.LineageRequest{}))
	if err != nil || lin.Msg.GetIssuer() != info.GetIssuer() || len(lin.Msg.GetRestores()) != 0 {
		t.Fatalf("lineage by a reader: %v %v", lin, err)
	}
}
