package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/check/history"
)

func TestCheckLinearizable(t *testing.T) {
	tests := []struct {
		name      string
		h         history.History
		wantCheck string
		wantText  string
	}{
		{name: "handover", h: ckHandover()},
		{
			// A follower answers a read from its stale copy after a newer
			// write was acknowledged.
			name: "stale read",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckWrite("p2", "k", 4, "p2-0", 2, 20, 30),
				ckRead("p3", "k", "p1-0", 1, 3, 40, 50),
			},
			wantCheck: LinearizabilityCheck,
			wantText:  `not linearizable: key "k" (3 operations): p3 read "k" -> ok value "p1-0" version 1 token 3 cannot be explained: the longest order found for the operations before it (2) leaves the key at "p2-0" v2 t4`,
		},
		{
			// The write timed out but was applied: the next accepted write
			// got version 3, and a read saw the timed-out value.
			name: "unknown write that happened",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckUnknownWrite("p1", "k", 3, "p1-1", 20, 1020),
				ckRead("p3", "k", "p1-1", 2, 3, 1500, 1510),
				ckWrite("p2", "k", 5, "p2-0", 3, 2000, 2010),
				ckRead("p2", "k", "p2-0", 3, 5, 2020, 2030),
			},
		},
		{
			// The write timed out and was applied late, after a write
			// invoked after it.
			name: "unknown write applied late",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckUnknownWrite("p1", "k", 3, "p1-1", 20, 1020),
				ckWrite("p1", "k", 3, "p1-2", 2, 30, 40),
				ckRead("p3", "k", "p1-2", 2, 3, 50, 60),
				ckRead("p3", "k", "p1-1", 3, 3, 100, 110),
			},
		},
		{
			// The write timed out and never happened.
			name: "unknown write that did not happen",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckUnknownWrite("p1", "k", 3, "p1-1", 20, 1020),
				ckWrite("p2", "k", 5, "p2-0", 2, 2000, 2010),
				ckRead("p2", "k", "p2-0", 2, 5, 2020, 2030),
			},
		},
		{
			// A read returns a value before the write of it was invoked.
			name: "read from the future",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckRead("p3", "k", "p1-1", 2, 3, 12, 15),
				ckUnknownWrite("p1", "k", 3, "p1-1", 20, 1020),
			},
			wantCheck: LinearizabilityCheck, wantText: `p3 read "k" -> ok value "p1-1" version 2 token 3 cannot be explained`,
		},
		{
			// A resource that rejects an equal token (docs/design.md §1: an equal
			// token is accepted).
			name: "equal token rejected",
			h: history.History{
				ckWrite("p1", "k", 5, "p1-0", 1, 0, 10),
				ckStaleWrite("p1", "k", 5, "p1-1", 5, 20, 30),
			},
			wantCheck: LinearizabilityCheck, wantText: `p1 write "k" token 5 value "p1-1" -> stale (required 5) cannot be explained`,
		},
		{
			name: "stale with the wrong required token",
			h: history.History{
				ckWrite("p2", "k", 5, "p2-0", 1, 0, 10),
				ckStaleWrite("p1", "k", 3, "p1-0", 4, 20, 30),
			},
			wantCheck: LinearizabilityCheck, wantText: "stale (required 4) cannot be explained",
		},
		{
			// A write is acknowledged with a version that skips one no
			// other write can have taken.
			name: "version gap",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckWrite("p1", "k", 3, "p1-1", 3, 20, 30),
			},
			wantCheck: LinearizabilityCheck, wantText: `p1 write "k" token 3 value "p1-1" -> ok version 3 cannot be explained: the longest order found for the operations before it (1) leaves the key at "p1-0" v1 t3, last written by p1 write "k" token 3 value "p1-0" -> ok version 1; no write in the history can have taken version 2 in time (a write applied twice`,
		},
		{
			// The SDK retried a put whose first attempt was applied: the
			// put took two versions and reported the second.
			name: "write applied twice",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckRead("p2", "k", "p1-0", 1, 3, 11, 12),
				ckWrite("p1", "k", 3, "p1-1", 3, 20, 700),
				ckRead("p2", "k", "p1-1", 3, 3, 710, 720),
			},
			wantCheck: LinearizabilityCheck, wantText: "no write in the history can have taken version 2",
		},
		{
			name: "key absent after a write",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckReadMissing("p2", "k", 20, 30),
			},
			wantCheck: LinearizabilityCheck, wantText: `p2 read "k" -> not_found cannot be explained`,
		},
		{
			// Grants of one lock: a later grant with a lower token.
			name: "lock token goes down",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 10),
				ckAcquire("p2", "lock-1", 12, 5, 20, 30),
			},
			wantCheck: LinearizabilityCheck,
			wantText:  `not linearizable: lock "lock-1" (2 operations): p2 acquire "lock-1" -> ok token 5 session 12 cannot be explained: p1 acquire "lock-1" -> ok token 7 session 11 completed 10ms before it was invoked, so its token had to be above 7`,
		},
		{
			// Two sessions told the same token of one lock, concurrently.
			name: "lock token granted twice",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 10),
				ckAcquire("p2", "lock-1", 12, 7, 5, 30),
			},
			wantCheck: LinearizabilityCheck, wantText: "token 7 session 12 cannot be explained",
		},
		{
			// The holder re-acquiring is told its grant again; grants to
			// others are concurrent and may be ordered either way.
			name: "lock re-reported and concurrent grants",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 10),
				ckAcquire("p1", "lock-1", 11, 7, 12, 14),
				ckAcquire("p2", "lock-1", 12, 9, 5, 40),
				ckAcquire("p3", "lock-1", 13, 8, 6, 50),
				ckAcquireFailed("p4", "lock-1", history.Unknown, 7, 1007),
			},
		},
		{
			// The holder is told its old grant after another session
			// was granted the lock.
			name: "lock re-reported after another grant",
			h: history.History{
				ckAcquire("p1", "lock-1", 11, 7, 0, 10),
				ckAcquire("p2", "lock-1", 12, 9, 20, 30),
				ckAcquire("p1", "lock-1", 11, 7, 40, 50),
			},
			wantCheck: LinearizabilityCheck, wantText: `p1 acquire "lock-1" -> ok token 7 session 11 cannot be explained`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ckWant(t, Linearizable(tt.h, Options{}), tt.wantCheck, tt.wantText)
		})
	}
}

func TestCheckLinearizable_visualisation(t *testing.T) {
	dir := t.TempDir()
	h := append(ckHandover(), ckRead("p3", "lock-2", "p3-0", 1, 3, 250, 251))
	got := Linearizable(h, Options{OutDir: dir})
	path := filepath.Join(dir, "linearizability-kv.html")
	ckWant(t, got, LinearizabilityCheck, "(visualisation: "+path+")")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<html") {
		t.Errorf("%s is not an HTML page", path)
	}
	if _, err := os.Stat(filepath.Join(dir, "linearizability-lock.html")); !os.IsNotExist(err) {
		t.Errorf("the lock model passed but its visualisation was written (err %v)", err)
	}
}

func TestCheckLinearizable_timeout(t *testing.T) {
	got := Linearizable(ckHandover(), Options{LinearizableTimeout: time.Nanosecond})
	if len(got) == 0 {
		t.Fatal("no violation, want undecided partitions reported")
	}
	for _, v := range got {
		if v.Check != LinearizabilityCheck || !strings.HasPrefix(v.Message, "linearizability check timed out (unknown): ") {
			t.Errorf("violation %s: %q, want a timeout", v.Check, v.Message)
		}
		if strings.Contains(v.Message, "not linearizable") {
			t.Errorf("timeout reported as a failure: %q", v.Message)
		}
	}
}

func TestKVStep(t *testing.T) {
	s := kvModelState{exists: true, value: "a", version: 4, token: 7}
	tests := []struct {
		name string
		in   kvModelInput
		out  kvModelOutput
		want []kvModelState
	}{
		{"write higher", kvModelInput{token: 8, value: "b"}, kvModelOutput{outcome: history.OK, version: 5}, []kvModelState{{true, "b", 5, 8}}},
		{"write equal", kvModelInput{token: 7, value: "b"}, kvModelOutput{outcome: history.OK, version: 5}, []kvModelState{{true, "b", 5, 7}}},
		{"write lower accepted", kvModelInput{token: 6, value: "b"}, kvModelOutput{outcome: history.OK, version: 5}, nil},
		{"write wrong version", kvModelInput{token: 8, value: "b"}, kvModelOutput{outcome: history.OK, version: 6}, nil},
		{"stale", kvModelInput{token: 6, value: "b"}, kvModelOutput{outcome: history.Stale, required: 7}, []kvModelState{s}},
		{"stale wrong required", kvModelInput{token: 6, value: "b"}, kvModelOutput{outcome: history.Stale, required: 8}, nil},
		{"stale equal", kvModelInput{token: 7, value: "b"}, kvModelOutput{outcome: history.Stale, required: 7}, nil},
		{"unknown", kvModelInput{token: 8, value: "b"}, kvModelOutput{outcome: history.Unknown}, []kvModelState{s, {true, "b", 5, 8}}},
		{"unknown below", kvModelInput{token: 6, value: "b"}, kvModelOutput{outcome: history.Unknown}, []kvModelState{s}},
		{"read", kvModelInput{read: true}, kvModelOutput{outcome: history.OK, value: "a", version: 4, token: 7}, []kvModelState{s}},
		{"read other token", kvModelInput{read: true}, kvModelOutput{outcome: history.OK, value: "a", version: 4, token: 6}, nil},
		{"read missing", kvModelInput{read: true}, kvModelOutput{outcome: history.NotFound}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kvStep(s, tt.in, tt.out)
			if len(got) != len(tt.want) {
				t.Fatalf("kvStep()=%v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("kvStep()=%v, want %v", got, tt.want)
				}
			}
		})
	}
	if got := kvStep(kvModelState{}, kvModelInput{read: true}, kvModelOutput{outcome: history.NotFound}); len(got) != 1 {
		t.Errorf("read missing of an absent key: kvStep()=%v, want the state unchanged", got)
	}
}

func TestDelayUnknownWrites(t *testing.T) {
	tests := []struct {
		name     string
		h        history.History
		wantCall float64 // of the unknown write, in ms
	}{
		{
			// Versions 1 and 2 belong to accepted writes: applied, the
			// timed-out write took version 3, after p2's next write.
			name: "no gap",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckUnknownWrite("p2", "k", 4, "p2-0", 5, 1005),
				ckWrite("p2", "k", 4, "p2-1", 2, 20, 30),
				ckRead("p3", "k", "p2-0", 3, 4, 40, 50),
			},
			wantCall: 20,
		},
		{
			// Version 2 is missing: the timed-out write may have taken it
			// right after p1's first write.
			name: "gap",
			h: history.History{
				ckWrite("p1", "k", 3, "p1-0", 1, 0, 10),
				ckUnknownWrite("p1", "k", 3, "p1-1", 5, 1005),
				ckRead("p3", "k", "p1-1", 2, 3, 12, 15),
				ckWrite("p2", "k", 4, "p2-0", 3, 20, 30),
			},
			wantCall: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := kvLinModel(tt.h)
			for _, op := range m.parts[0].ops {
				if op.Output.(kvModelOutput).outcome == history.Unknown && op.Call != ckMs(tt.wantCall) {
					t.Errorf("unknown write's Call=%v, want %v", time.Duration(op.Call-ckBase), time.Duration(ckMs(tt.wantCall)-ckBase))
				}
			}
			ckWant(t, Linearizable(tt.h, Options{}), "", "")
		})
	}
}
