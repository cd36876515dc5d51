package fsm

import (
	"fmt"
	"sort"
	"strings"

	fence "github.com/fenced-dev/fenced"
)

// replyWindow is how many results each session remembers for retries. A
// client may have this many requests of one session in flight at once.
const replyWindow = 64

type replyKind int32

const (
	replyGranted replyKind = iota + 1
	replyQueued
	replyNotGranted
	replyReleased
	replyAlreadyReleased
	replyNotOwned
	// replyWithdrawn marks an acquire that a release withdrew (see
	// withdraw): a copy of it applied later is refused and changes
	// nothing. Appended last: kinds are stored in snapshots.
	replyWithdrawn
	// replyProclaimed is a proclaim applied by an election's leader, with
	// its term token (election.go).
	replyProclaimed
	// replyLast is the last kind; a new kind goes before it.
	replyLast = replyProclaimed
)

func releaseReply(r ReleaseResult) replyKind {
	switch r {
	case Released:
		return replyReleased
	case NotOwned:
		return replyNotOwned
	}
	return replyAlreadyReleased
}

func (k replyKind) release() ReleaseResult {
	switch k {
	case replyReleased:
		return Released
	case replyNotOwned:
		return NotOwned
	}
	return AlreadyReleased
}

func (k replyKind) isRelease() bool { return k >= replyReleased && k <= replyNotOwned }

// reply is the remembered result of the request (session, seq). A queue
// claim's reply (named queueReplyName) has no holder: its holder field
// keeps the outcome of the ack the claim carried (AckOutcome), so a retry
// reports it again.
type reply struct {
	seq      uint64
	kind     replyKind
	name     string
	token    fence.Token
	holder   uint64
	issuedAt int64
}

// replies is a session's de-duplication table: the results of its newest
// replyWindow requests, sorted by seq. Requests at or below floor were
// forgotten and cannot be retried.
type replies struct {
	floor uint64
	list  []reply
}

func (r *replies) empty() bool { return len(r.list) == 0 && r.floor == 0 }

func (r *replies) find(seq uint64) int {
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].seq >= seq })
	if i < len(r.list) && r.list[i].seq == seq {
		return i
	}
	return -1
}

// get returns the remembered reply of seq. A seq that was forgotten, or one
// reused for a request on another name, is an error: the outcome of the
// original request can no longer be told.
func (r *replies) get(seq uint64, name string) (reply, bool, error) {
	if seq <= r.floor {
		return reply{}, false, fmt.Errorf("%w: request seq %d is too old to retry (only the newest %d requests of a session are remembered); use a new seq",
			fence.ErrInvalidArgument, seq, replyWindow)
	}
	i := r.find(seq)
	if i < 0 {
		return reply{}, false, nil
	}
	if r.list[i].name != name {
		return reply{}, false, fmt.Errorf("%w: request seq %d was already used for %s; every request needs its own seq", fence.ErrInvalidArgument, seq, replyObject(r.list[i].name))
	}
	return r.list[i], true, nil
}

// replyObject names the object a remembered reply is for: its name, with
// the primitive when the primitive keeps its replies apart from the lock's
// under "\x00primitive\x00name" (rwReplyName).
func replyObject(rname string) string {
	if rest, ok := strings.CutPrefix(rname, "\x00"); ok {
		if prim, name, ok := strings.Cut(rest, "\x00"); ok {
			return fmt.Sprintf("%s %q", prim, name)
		}
	}
	return fmt.Sprintf("%q", rname)
}

// put records a reply, replacing an earlier one of the same seq. seq 0 is
// never recorded.
func (r *replies) put(rep reply) {
	if rep.seq == 0 {
		return
	}
	if i := r.find(rep.seq); i >= 0 {
		r.list[i] = rep
		return
	}
	i := sort.Search(len(r.list), func(i int) bool { return r.list[i].seq > rep.seq })
	r.list = append(r.list, reply{})
	copy(r.list[i+1:], r.list[i:])
	r.list[i] = rep
	if len(r.list) > replyWindow {
		r.floor = r.list[0].seq
		r.list = append(r.list[:0], r.list[1:]...)
	}
}

// holderOf returns the holder field of request seq's reply (0 if none);
// a queue claim's reply keeps its ack's outcome there (queue.go).
func (r *replies) holderOf(seq uint64) uint64 {
	if i := r.find(seq); i >= 0 {
		return r.list[i].holder
	}
	return 0
}

// at returns request seq's reply, if recorded.
func (r *replies) at(seq uint64) (reply, bool) {
	if i := r.find(seq); i >= 0 {
		return r.list[i], true
	}
	return reply{}, false
}

// setHolder sets the holder field of request seq's reply, if recorded.
func (r *replies) setHolder(seq, holder uint64) {
	if i := r.find(seq); i >= 0 {
		r.list[i].holder = holder
	}
}

// promote turns the queued reply of seq into a grant.
func (r *replies) promote(seq uint64, tok fence.Token, issuedAt int64) {
	if i := r.find(seq); i >= 0 {
		r.list[i].kind, r.list[i].token, r.list[i].issuedAt, r.list[i].holder = replyGranted, tok, issuedAt, 0
	}
}
