package check

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// A secure cluster serves only TLS and only to callers with a token: a
// plain-HTTP probe and a TLS client without a token are turned away, the
// workers' identity may read the kv but not change the membership, and
// the harness's admin identity may.
func TestStartCluster_Secure(t *testing.T) {
	bin := proctest.FaultBinary(t) // built before the clock starts: a loaded machine builds slowly
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := startCluster(ctx, bin, dir, 1, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(c.nodes[0].logPath)
			t.Logf("node log:\n%s", b)
		}
	}()

	if resp, err := http.Get("http://" + c.nodes[0].api + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a plain-HTTP /readyz got 200 from a secure node")
		}
	}
	ca := filepath.Join(c.sec.certsDir, "ca.crt")
	if ca != c.sec.caFile() {
		t.Fatalf("CA file %s, want %s", c.sec.caFile(), ca)
	}
	anon, err := newClient(c.endpoints(), c.sec.caFile(), filepath.Join(dir, "no-such-token"))
	if err == nil {
		anon.Close()
		t.Fatal("a client with a missing token file was made")
	}
	worker, err := newClient(c.endpoints(), c.sec.caFile(), c.sec.workerToken)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	kctx, kcancel := context.WithTimeout(ctx, 5*time.Second)
	defer kcancel()
	if _, err := worker.KVGet(kctx, "k"); !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("worker identity KVGet of a missing key: %v, want ErrKeyNotFound", err)
	}
	tc, err := client.LoadTLS(c.sec.caFile(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc.ServerName = "localhost"
	anon, err = client.New(c.endpoints(), client.WithTLS(tc))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.KVGet(kctx, "k"); err == nil || errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("KVGet without a token: %v, want a refusal", err)
	}
	if err := worker.RemoveMember(kctx, "n9"); !errors.Is(err, fence.ErrPermissionDenied) {
		t.Fatalf("worker identity RemoveMember: %v, want ErrPermissionDenied", err)
	}
	admin, err := c.sec.adminClient(c.endpoints())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.RemoveMember(kctx, "n9"); errors.Is(err, fence.ErrPermissionDenied) {
		t.Fatalf("admin identity RemoveMember: %v", err)
	}
}
