package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// writeLog writes batches of 3 entries each (one fsynced append each) to a
// fresh log with small segments and returns its dir.
func writeLog(t *testing.T, batches int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := openLogStore(dir, 1024, hclog.NewNullLogger(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	index := uint64(1)
	for range batches {
		var logs []*raft.Log
		for range 3 {
			logs = append(logs, &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: []byte("entry data of some length")})
			index++
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// segmentFiles returns the log's segment files, oldest first.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments: %v", err)
	}
	return files
}

// commitFrames returns the offsets of the commit frames in a segment.
func commitFrames(t *testing.T, path string) []int {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	off := walFileHeaderLen
	for off+walFrameHeaderLen <= len(buf) && buf[off] != 0 {
		n := 0
		if buf[off] == 3 {
			out = append(out, off)
		} else {
			n = int(buf[off+4]) | int(buf[off+5])<<8
		}
		off += walFrameHeaderLen + (n+7)/8*8
	}
	return out
}

func damage(t *testing.T, path string, off int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("XXXXXXXX"), int64(off)); err != nil {
		t.Fatal(err)
	}
}

func TestCheckLog(t *testing.T) {
	reopen := func(dir string) error {
		s, err := openLogStore(dir, 1024, hclog.NewNullLogger(), nil, nil)
		if err == nil {
			s.close()
		}
		return err
	}
	t.Run("intact", func(t *testing.T) {
		if err := reopen(writeLog(t, 3)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("middle of the tail", func(t *testing.T) {
		dir := writeLog(t, 3)
		segs := segmentFiles(t, dir)
		tail := segs[len(segs)-1]
		commits := commitFrames(t, tail)
		damage(t, tail, commits[0]-16) // in the first batch's data
		if err := reopen(dir); !errors.Is(err, ErrDamaged) {
			t.Fatalf("reopen: %v, want ErrDamaged", err)
		}
	})
	t.Run("frame header in the middle", func(t *testing.T) {
		dir := writeLog(t, 3)
		tail := segmentFiles(t, dir)[0]
		damage(t, tail, commitFrames(t, tail)[0]+walFrameHeaderLen) // first frame of the second batch
		if err := reopen(dir); !errors.Is(err, ErrDamaged) {
			t.Fatalf("reopen: %v, want ErrDamaged", err)
		}
	})
	t.Run("last batch, same boot", func(t *testing.T) {
		dir := writeLog(t, 3)
		tail := segmentFiles(t, dir)[0]
		commits := commitFrames(t, tail)
		damage(t, tail, commits[len(commits)-1]-16)
		if err := reopen(dir); !errors.Is(err, ErrDamaged) {
			t.Fatalf("reopen: %v, want ErrDamaged: the machine did not restart, so no write was torn", err)
		}
	})
	t.Run("last batch, after a restart of the machine", func(t *testing.T) {
		dir := writeLog(t, 3)
		tail := segmentFiles(t, dir)[0]
		commits := commitFrames(t, tail)
		damage(t, tail, commits[len(commits)-1]-16)
		if err := os.WriteFile(filepath.Join(dir, bootIDFile), []byte("an-earlier-boot\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := reopen(dir); err != nil {
			t.Fatalf("reopen: %v, want the last batch dropped as a torn write", err)
		}
		if got := len(commitFrames(t, tail)); got != len(commits)-1 {
			t.Fatalf("%d commit frames after the reopen, want %d: the dropped batch is cleared", got, len(commits)-1)
		}
		if err := reopen(dir); err != nil {
			t.Fatalf("second reopen: %v", err)
		}
	})
	t.Run("file cut in the last batch", func(t *testing.T) {
		dir := writeLog(t, 3)
		tail := segmentFiles(t, dir)[0]
		commits := commitFrames(t, tail)
		if err := os.Truncate(tail, int64(commits[len(commits)-1]-16)); err != nil {
			t.Fatal(err)
		}
		if err := reopen(dir); err != nil {
			t.Fatalf("reopen: %v, want the cut write dropped", err)
		}
	})
	t.Run("an append that never committed", func(t *testing.T) {
		dir := writeLog(t, 3)
		tail := segmentFiles(t, dir)[0]
		commits := commitFrames(t, tail)
		buf, err := os.ReadFile(tail)
		if err != nil {
			t.Fatal(err)
		}
		// The last batch again after the last commit frame, without its
		// commit frame: a write that stopped before it.
		end := commits[len(commits)-1]
		unfinished := buf[commits[len(commits)-2]+walFrameHeaderLen : end]
		f, err := os.OpenFile(tail, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(unfinished, int64(end+walFrameHeaderLen))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := reopen(dir); err != nil {
			t.Fatalf("reopen: %v, want the unfinished append dropped", err)
		}
		after, _ := os.ReadFile(tail)
		if lastNonZero(after) != end+walFrameHeaderLen-1 {
			t.Fatalf("the file ends at byte %d, want %d: the unfinished append is cleared", lastNonZero(after), end+walFrameHeaderLen-1)
		}
	})
	t.Run("sealed segment", func(t *testing.T) {
		dir := writeLog(t, 30)
		segs := segmentFiles(t, dir)
		if len(segs) < 2 {
			t.Fatalf("%d segments, want several", len(segs))
		}
		commits := commitFrames(t, segs[0])
		damage(t, segs[0], commits[len(commits)-1]-16) // its last batch: sealed, so not a torn write
		if err := reopen(dir); !errors.Is(err, ErrDamaged) {
			t.Fatalf("reopen: %v, want ErrDamaged", err)
		}
	})
}
