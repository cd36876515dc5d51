package checker

import (
	"fmt"
	"testing"

	"github.com/fenced-dev/fenced/check/history"
)

// ckGrant is a committed grant of kind (a permit's scope "name/slot").
func ckGrant(kind string, seq uint64, name, scope string, session, token uint64, at float64) history.Op {
	op := ckEvent("", history.OpServerGrant, seq, name, session, token, at)
	op.GrantKind, op.Scope = kind, scope
	return op
}

// ckEnd is a committed release of a grant of kind.
func ckEnd(kind string, seq uint64, name string, session, token uint64, at float64) history.Op {
	op := ckEvent("", history.OpServerRelease, seq, name, session, token, at)
	op.GrantKind = kind
	return op
}

// ckPermitAcquire is a worker's granted acquire of a permit of a
// semaphore of capacity.
func ckPermitAcquire(p, name string, slot, capacity int, session, token uint64, inv, comp float64) history.Op {
	op := ckAcquire(p, name, session, token, inv, comp)
	op.GrantKind, op.Scope, op.Capacity = history.GrantPermit, fmt.Sprintf("%s/%d", name, slot), capacity
	return op
}

func TestCheckSemaphores(t *testing.T) {
	permit := func(seq uint64, slot int, session, token uint64, at float64) history.Op {
		return ckGrant(history.GrantPermit, seq, "sem-0", fmt.Sprintf("sem-0/%d", slot), session, token, at)
	}
	acquires := history.History{ckPermitAcquire("p1", "sem-0", 0, 2, 11, 3, 0, 10)}
	tests := []struct {
		name      string
		events    []history.Op
		wantCheck string
		wantText  string
	}{
		{
			// Two permits, one released, its slot reused; a session's
			// expiry frees its permit.
			name: "capacity kept",
			events: []history.Op{
				permit(5, 0, 11, 3, 10), permit(6, 1, 12, 4, 20),
				ckEnd(history.GrantPermit, 7, "sem-0", 11, 3, 30), permit(7, 0, 13, 5, 30),
				ckEvent("", history.OpServerExpire, 8, "", 12, 0, 40), ckEnd(history.GrantPermit, 8, "sem-0", 12, 4, 40), permit(8, 1, 14, 6, 40),
				ckEvent("", history.OpServerExpire, 9, "", 13, 0, 50), permit(9, 0, 15, 7, 50),
			},
		},
		{
			name:      "over capacity",
			events:    []history.Op{permit(5, 0, 11, 3, 10), permit(6, 1, 12, 4, 20), permit(7, 2, 13, 5, 30)},
			wantCheck: SemaphoreCheck, wantText: `semaphore "sem-0" of capacity 2 granted a permit (slot 2, session 13, token 5) at log index 7 while 2 permits were in force (tokens 3, 4)`,
		},
		{
			name:      "duplicate slot",
			events:    []history.Op{permit(5, 1, 11, 3, 10), permit(6, 1, 12, 4, 20)},
			wantCheck: SemaphoreCheck, wantText: `semaphore "sem-0" granted slot 1 to session 12 (token 4) at log index 6 while session 11 held it (token 3, granted at index 5)`,
		},
		{
			name:      "slot out of range",
			events:    []history.Op{permit(5, 2, 11, 3, 10)},
			wantCheck: SemaphoreCheck, wantText: `scope "sem-0/2"`,
		},
		{
			// A release of another semaphore's permit frees nothing here.
			name: "release of another name",
			events: []history.Op{
				permit(5, 0, 11, 3, 10), permit(6, 1, 12, 4, 20),
				ckEnd(history.GrantPermit, 7, "sem-1", 11, 3, 30), permit(7, 0, 13, 5, 30),
			},
			wantCheck: SemaphoreCheck, wantText: "while 2 permits were in force",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := append(ckReplicate(ckNodes, tt.events...), acquires...).Sorted()
			ckWant(t, Semaphores(h), tt.wantCheck, tt.wantText)
		})
	}
}

func TestCheckRWExclusion(t *testing.T) {
	read := func(seq uint64, session, token uint64, at float64) history.Op {
		return ckGrant(history.GrantRead, seq, "rw-0", "rw-0", session, token, at)
	}
	write := func(seq uint64, session, token uint64, at float64) history.Op {
		return ckGrant(history.GrantWrite, seq, "rw-0", "rw-0", session, token, at)
	}
	tests := []struct {
		name      string
		events    []history.Op
		wantCheck string
		wantText  string
	}{
		{
			// Two readers together, then a writer once both left (one by
			// release, one by expiry), then readers again.
			name: "readers then writer then readers",
			events: []history.Op{
				read(5, 11, 3, 10), read(6, 12, 4, 20),
				ckEnd(history.GrantRead, 7, "rw-0", 11, 3, 30),
				ckEvent("", history.OpServerExpire, 8, "", 12, 0, 40), write(8, 13, 5, 40),
				ckEnd(history.GrantWrite, 9, "rw-0", 13, 5, 50), read(9, 14, 6, 50), read(9, 15, 7, 50),
			},
		},
		{
			name:      "reader with writer",
			events:    []history.Op{write(5, 11, 3, 10), read(6, 12, 4, 20)},
			wantCheck: RWExclusionCheck, wantText: `read/write lock "rw-0" granted a reader (session 12, token 4) at log index 6 while session 11 held it for writing (token 3, granted at index 5)`,
		},
		{
			name:      "writer with a reader",
			events:    []history.Op{read(5, 11, 3, 10), write(6, 12, 4, 20)},
			wantCheck: RWExclusionCheck, wantText: `granted a writer (session 12, token 4) at log index 6 while session 11 held a read grant (token 3`,
		},
		{
			name:      "two writers",
			events:    []history.Op{write(5, 11, 3, 10), write(6, 12, 4, 20)},
			wantCheck: RWExclusionCheck, wantText: "while session 11 held a write grant",
		},
		{
			// An exclusive lock of the same name is another object.
			name:   "a lock of the same name",
			events: []history.Op{write(5, 11, 3, 10), ckEvent("", history.OpServerGrant, 6, "rw-0", 12, 4, 20)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, RWExclusion(ckReplicate(ckNodes, tt.events...).Sorted()), tt.wantCheck, tt.wantText)
		})
	}
}

func TestCheckElections(t *testing.T) {
	lead := func(seq uint64, name string, session, token uint64, at float64) history.Op {
		return ckGrant(history.GrantLeader, seq, name, name, session, token, at)
	}
	tests := []struct {
		name      string
		events    []history.Op
		wantCheck string
		wantText  string
	}{
		{
			// A resign hands over at one index; an expiry ends the next
			// term; two elections lead at once.
			name: "handovers",
			events: []history.Op{
				lead(5, "e-0", 11, 3, 10), lead(6, "e-1", 12, 4, 20),
				ckEnd(history.GrantLeader, 7, "e-0", 11, 3, 30), lead(7, "e-0", 13, 5, 30),
				ckEvent("", history.OpServerExpire, 8, "", 13, 0, 40), ckEnd(history.GrantLeader, 8, "e-0", 13, 5, 40), lead(8, "e-0", 14, 6, 40),
			},
		},
		{
			name:      "two leaders",
			events:    []history.Op{lead(5, "e-0", 11, 3, 10), lead(6, "e-0", 12, 4, 20)},
			wantCheck: ElectionCheck, wantText: `election "e-0" made session 12 leader (term token 4) at log index 6 while session 11 led (term token 3, since index 5)`,
		},
		{
			name: "term goes back",
			events: []history.Op{
				lead(5, "e-0", 11, 7, 10), ckEnd(history.GrantLeader, 6, "e-0", 11, 7, 20), lead(6, "e-0", 12, 6, 20),
			},
			wantCheck: ElectionCheck, wantText: `made session 12 leader with term token 6 at log index 6 after session 11 had led with term token 7 (index 5)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, Elections(ckReplicate(ckNodes, tt.events...).Sorted()), tt.wantCheck, tt.wantText)
		})
	}
}

// The lock checkers leave the other primitives' grants alone: shared
// readers and several permits of one name are no double grant of a lock.
func TestCheckMutualExclusion_otherPrimitives(t *testing.T) {
	h := ckReplicate(ckNodes,
		ckGrant(history.GrantRead, 5, "x", "x", 11, 3, 10), ckGrant(history.GrantRead, 6, "x", "x", 12, 4, 20),
		ckGrant(history.GrantPermit, 7, "y", "y/0", 13, 5, 30), ckGrant(history.GrantPermit, 8, "y", "y/1", 14, 6, 40),
	).Sorted()
	ckWant(t, MutualExclusion(h), "", "")
}
