package fsm_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// wantAlreadyUsed fails unless res refuses a request whose seq the
// session already used for another primitive's object of the same name.
func wantAlreadyUsed(t *testing.T, what string, res fsm.Result) {
	t.Helper()
	if !errors.Is(res.Err, fence.ErrInvalidArgument) || !strings.Contains(res.Err.Error(), "already used") || res.Granted || res.Queued {
		t.Fatalf("%s = %+v, want refused as already used", what, res)
	}
}

// A queue, an election and a lock of the same name are three objects: a
// seq a session used for one is never answered with another's result. A
// lock acquire retried with the seq of a granted claim (or campaign) must
// not be answered with a lock grant carrying the claim's (or the term's)
// token: that token is above the lock holder's, so the forged grant would
// pass the resource's fence and break the lock's mutual exclusion. And a
// claim with the seq of a lock acquire must not read the lock's holder as
// the outcome of an ack it never carried.
func TestDedup_QueueAndElectionApartFromLockOfSameName(t *testing.T) {
	m := newMachine(t)
	a, b := createSession(t, m), createSession(t, m)
	held := mustGrant(t, "lock", acquire(m, b, 1, "x", false))
	push(m, 1000, &statev1.QueuePush{Queue: "x", Payload: []byte("job")})
	claim := claimQ(m, 1000, a, 1, "x", 5000, false)
	if !claim.Granted || claim.Grant.Token <= held.Token {
		t.Fatalf("claim = %+v", claim)
	}
	term := mustGrant(t, "campaign", campaign(m, a, 2, "x", "v"))
	notGranted := acquire(m, a, 3, "x", false) // b holds the lock
	if notGranted.Granted || notGranted.Holder != b {
		t.Fatalf("acquire of a held lock = %+v", notGranted)
	}
	push(m, 1000, &statev1.QueuePush{Queue: "x", Payload: []byte("job 2")})
	before := mustSnapshot(t, m)

	wantAlreadyUsed(t, "lock acquire with the seq of a claim", acquire(m, a, 1, "x", false))
	wantAlreadyUsed(t, "lock acquire with the seq of a campaign", acquire(m, a, 2, "x", false))
	wantAlreadyUsed(t, "campaign with the seq of a claim", campaign(m, a, 1, "x", "v"))
	wantAlreadyUsed(t, "campaign with the seq of a lock acquire", campaign(m, a, 3, "x", "v"))
	wantAlreadyUsed(t, "claim with the seq of a lock acquire", ackClaimQ(m, 1000, a, 3, "x", 5000, false, 0, 0))
	wantAlreadyUsed(t, "claim with the seq of a campaign", ackClaimQ(m, 1000, a, 2, "x", 5000, false, 0, 0))
	if !bytes.Equal(before, mustSnapshot(t, m)) {
		t.Fatal("a refused request changed the state")
	}
	// Each retried with its own primitive still answers its first result.
	if r := claimQ(m, 1000, a, 1, "x", 5000, false); r.Grant != claim.Grant {
		t.Fatalf("retried claim = %+v, want %+v", r, claim.Grant)
	}
	if r := campaign(m, a, 2, "x", "v"); r.Grant != term {
		t.Fatalf("retried campaign = %+v, want %+v", r, term)
	}
	if info := m.Lock("x"); info.Holder != held {
		t.Fatalf("lock after the refused requests: %+v, want still %+v", info, held)
	}
}

// A queue claim's remembered reply keeps its ack's outcome; a restored
// snapshot whose claim reply names an outcome no ack has is refused.
func TestDedup_RestoreRefusesUnknownAckOutcome(t *testing.T) {
	m := newMachine(t)
	a := createSession(t, m)
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("one")})
	push(m, 1000, &statev1.QueuePush{Queue: "q", Payload: []byte("two")})
	first := claimQ(m, 1000, a, 1, "q", 5000, false)
	if next := ackClaimQ(m, 1000, a, 2, "q", 5000, false, 1, first.Grant.Token); next.Queue.Ack != fsm.AckAcked {
		t.Fatalf("ack-and-claim-next = %+v", next)
	}
	var st statev1.State
	if err := proto.Unmarshal(mustSnapshot(t, m), &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range st.Sessions {
		for _, r := range s.Replies {
			if r.Seq == 2 && r.Holder == uint64(fsm.AckAcked) {
				r.Holder, found = 0b0100, true // an outcome of none below an acked one
			}
		}
	}
	if !found {
		t.Fatal("the claim's reply with its ack outcome is not in the snapshot")
	}
	bad, err := proto.Marshal(&st)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.New(nil).Restore(bad); err == nil || !strings.Contains(err.Error(), "ack outcome") {
		t.Fatalf("restore of a claim reply with packed ack outcomes 0b0100: %v, want refused", err)
	}
}
