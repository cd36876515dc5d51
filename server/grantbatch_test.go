package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Grants signed from many goroutines at once come back each with its own
// token and scope, verifying; under that load some are signed in batches
// ("fg2."), and a batcher of max 1 signs every grant alone ("fg1."). A
// batcher that handed one job another's wire, or lost a job, fails this.
func TestGrantBatcher_EachGrantGetsItsOwn(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	id := fence.KeyIDOf(pub)
	ks, err := fence.NewKeySet("cluster", id, []fence.PublicKey{{ID: id, Key: pub}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := newGrantSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 4, DefaultSignBatchMax} {
		b := newGrantBatcher(limit)
		const workers, each = 16, 40
		var wg sync.WaitGroup
		var mu sync.Mutex
		forms := map[string]int{}
		biggest := 0
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					tok := fence.Token(1 + w*each + i)
					j := &signJob{grant: fence.SignedGrant{Issuer: "cluster", Kind: fence.KindLock, Scope: fmt.Sprintf("s/%d", tok), Token: tok, IssuedAt: time.UnixMilli(1)}, keyID: id, signer: signer}
					b.sign(j)
					if j.err != nil {
						t.Error(j.err)
						return
					}
					g, err := ks.VerifyGrant(j.wire)
					if err != nil {
						t.Errorf("token %d: %v", tok, err)
						return
					}
					if g.Token != tok || g.Scope != fmt.Sprintf("s/%d", tok) {
						t.Errorf("the job of token %d got the grant of token %d, scope %q", tok, g.Token, g.Scope)
					}
					mu.Lock()
					forms[j.wire[:4]]++
					if g.Batch != nil {
						biggest = max(biggest, g.Batch.Size)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if biggest > limit {
			t.Errorf("max %d: a batch of %d", limit, biggest)
		}
		if limit == 1 && forms["fg2."] != 0 {
			t.Errorf("max 1: %d grants signed in batches", forms["fg2."])
		}
		if limit > 1 && forms["fg2."] == 0 {
			t.Errorf("max %d: %d goroutines signing at once made no batch: %v", limit, workers, forms)
		}
		// The drainer releases the last callers, then finds the queue
		// empty and ends.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			b.mu.Lock()
			busy, pending := b.busy, len(b.pending)
			b.mu.Unlock()
			if !busy && pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("max %d: the batcher is left busy=%v with %d pending", limit, busy, pending)
			}
		}
		t.Logf("max %d: %v, largest batch %d", limit, forms, biggest)
	}
}

// A rotation between two grants of one batch: each is signed by the key
// it was handed with.
func TestGrantBatcher_KeysApart(t *testing.T) {
	var signers [2]*grantSigner
	var ids [2]string
	keys := []fence.PublicKey{}
	for i := range signers {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		signers[i], _ = newGrantSigner(priv)
		ids[i] = fence.KeyIDOf(priv.Public().(ed25519.PublicKey))
		keys = append(keys, fence.PublicKey{ID: ids[i], Key: priv.Public().(ed25519.PublicKey)})
	}
	ks, err := fence.NewKeySet("cluster", ids[1], keys)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*signJob
	for i := range 5 {
		jobs = append(jobs, &signJob{grant: fence.SignedGrant{Issuer: "cluster", Kind: fence.KindLock, Scope: "x", Token: fence.Token(i + 1)}, keyID: ids[i%2], signer: signers[i%2]})
	}
	newGrantBatcher(8).signAll(jobs)
	for i, j := range jobs {
		g, err := ks.VerifyGrant(j.wire)
		if err != nil || g.KeyID != ids[i%2] || g.Token != fence.Token(i+1) {
			t.Fatalf("job %d: %+v %v, want token %d by key %s", i, g, err, i+1, ids[i%2])
		}
		if !strings.HasPrefix(j.wire, "fg2.") {
			t.Fatalf("job %d: %.4s, want a batch of its key's grants (fg2.)", i, j.wire)
		}
	}
}
