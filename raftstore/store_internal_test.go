package raftstore

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A follower that drops the tail of its log (entries of a deposed leader)
// and then restarts must reopen its log (hashicorp/raft-wal#31 made this
// panic in v0.4.0).
func TestLogStore_ReopenAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	open := func() *logStore {
		s, err := openLogStore(dir, 0, hclog.NewNullLogger(), nil, nil)
		if err != nil {
			t.Fatalf("open log: %v", err)
		}
		return s
	}
	s := open()
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(8, 10); err != nil {
		t.Fatalf("truncate tail: %v", err)
	}
	if err := s.StoreLog(&raft.Log{Index: 8, Term: 2, Type: raft.LogCommand, Data: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	s.close()
	s = open()
	defer s.close()
	var l raft.Log
	for _, i := range []uint64{1, 7, 8} {
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d) after reopen: %v", i, err)
		}
	}
	if l.Term != 2 {
		t.Fatalf("entry 8 has term %d, want the replacement's 2", l.Term)
	}
}
