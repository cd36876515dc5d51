package server

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// presignServer is a Server with just what presignGrants uses: a state
// machine holding a signing key, and a grant batcher of batches of max.
func presignServer(t *testing.T, max int) (*Server, *fence.KeySet) {
	t.Helper()
	s := &Server{sm: newStateMachine(nil), grantBatch: newGrantBatcher(max), log: slog.New(slog.DiscardHandler)}
	for _, cmd := range []*statev1.Command{
		{Op: &statev1.Command_Init{Init: &statev1.Init{Issuer: "cluster-1"}}},
		{NowUnixMs: 1, Op: &statev1.Command_RotateKeys{RotateKeys: newRotation(fsm.DefaultKeysKept, true)}},
	} {
		if res := s.sm.m.Apply(cmd); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	id, _, ok := s.sm.m.SigningKey()
	if !ok {
		t.Fatal("no signing key after the rotation")
	}
	ks, err := fence.NewKeySet("cluster-1", id, s.sm.m.SigningKeys())
	if err != nil {
		t.Fatal(err)
	}
	return s, ks
}

// The grants among one entry's results are signed before their callers
// get them, in batches of at most --sign-batch-max with one signature
// each, every one over its own token and scope; results that grant
// nothing are left alone, and handOut hands out the signature made here.
// A presign that mixed up the grants, signed a refusal or made a
// signature per grant fails this.
func TestPresignGrants_OneSignaturePerBatchOfAnEntry(t *testing.T) {
	s, ks := presignServer(t, 4)
	s.cfg.SignGrants = true
	var results []any
	var granted []*fsm.Result
	for i := range 10 {
		res := &fsm.Result{Err: fmt.Errorf("refused %d", i)}
		if i%5 != 4 { // 8 grants, 2 refusals
			tok := fence.Token(100 + i)
			res = &fsm.Result{Granted: true, Grant: fence.Grant{Name: fmt.Sprintf("lock/%d", i), Kind: fence.KindLock, Scope: fmt.Sprintf("lock/%d", i), Token: tok, Issuer: "cluster-1", Session: uint64(i + 1), IssuedAt: time.UnixMilli(1_700_000_000_000)}}
			granted = append(granted, res)
		}
		results = append(results, res)
	}
	s.presignGrants(results)
	if got := s.grantBatch.signatures.Load(); got != 2 {
		t.Errorf("8 grants in batches of up to 4 made %d signatures, want 2", got)
	}
	if got := s.grantBatch.grants.Load(); got != 8 {
		t.Errorf("%d grants counted signed, want 8", got)
	}
	for _, r := range results {
		res := r.(*fsm.Result)
		if !res.Granted && res.Grant.Signed != "" {
			t.Errorf("a refusal got a signature: %+v", res)
		}
	}
	for _, res := range granted {
		sg, err := ks.VerifyGrant(res.Grant.Signed)
		if err != nil {
			t.Fatalf("%s: %v", res.Grant.Name, err)
		}
		if sg.Token != res.Grant.Token || sg.Scope != res.Grant.Scope || sg.Batch == nil || sg.Batch.Size != 4 {
			t.Errorf("%s (token %d): signed grant of token %d, scope %q, batch %+v", res.Grant.Name, res.Grant.Token, sg.Token, sg.Scope, sg.Batch)
		}
		if out := s.handOut(res.Grant); out.GetSigned() != res.Grant.Signed {
			t.Errorf("%s: handOut gave %q, not the grant's signature", res.Grant.Name, out.GetSigned())
		}
	}
	before := s.grantBatch.signatures.Load()
	s.presignGrants(results) // already signed: nothing to do
	if s.grantBatch.signatures.Load() != before {
		t.Error("grants signed already were signed again")
	}
}
