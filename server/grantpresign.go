package server

import (
	"sync"

	"github.com/fenced-dev/fenced/fsm"
)

// presignGrants signs the grants among the results of one entry this
// leader proposed, all together (one Ed25519 signature per up to
// --sign-batch-max of them, fence.SignGrantBatch), on the goroutine that
// committed the entry and before any of its proposers is answered. Each
// grant so signed carries its wire form in Grant.Signed, which handOut
// hands out as it is; a grant not signed here (one a waiter got later,
// or when there is no key yet) is signed by the grant batcher as before.
// An entry's proposers are woken one after another, so the batcher alone
// gathered five or six grants a signature under 64 clients; an entry
// holds all the grants it made.
func (s *Server) presignGrants(results []any) {
	p := presigns.Get().(*presign)
	defer p.reset()
	for _, r := range results {
		if res, ok := r.(*fsm.Result); ok && res.Granted && res.Grant.Token != 0 && res.Grant.Signed == "" {
			p.results = append(p.results, res)
		}
	}
	if len(p.results) == 0 {
		return
	}
	id, signer, ok := s.currentSigner()
	if !ok {
		return
	}
	for _, res := range p.results {
		p.jobs = append(p.jobs, signJob{grant: signedOf(res.Grant), keyID: id, signer: signer})
	}
	for i := range p.jobs {
		p.batch = append(p.batch, &p.jobs[i])
	}
	for b := p.batch; len(b) > 0; {
		n := min(len(b), s.grantBatch.max)
		s.grantBatch.signAll(b[:n])
		b = b[n:]
	}
	for i, res := range p.results {
		if j := &p.jobs[i]; j.err == nil {
			res.Grant.Signed = j.wire
		} else {
			s.log.Error("sign grant", "name", res.Grant.Name, "token", res.Grant.Token, "err", j.err)
		}
	}
}

// presign is presignGrants' working memory, reused across entries.
type presign struct {
	results []*fsm.Result
	jobs    []signJob
	batch   []*signJob
}

var presigns = sync.Pool{New: func() any { return new(presign) }}

// reset empties p and puts it back for the next entry.
func (p *presign) reset() {
	clear(p.results)
	clear(p.jobs)
	clear(p.batch)
	p.results, p.jobs, p.batch = p.results[:0], p.jobs[:0], p.batch[:0]
	presigns.Put(p)
}
