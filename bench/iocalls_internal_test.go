package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestIOCallsOf_CountsThisProcesssCalls makes a known number of write and
// read system calls on a file and checks that ioCallsOf counts them: the
// writes no fewer and not many more (the test binary's own output is all
// else this process writes meanwhile), the reads no fewer (ioCallsOf's
// own reads of /proc, one file a process, are counted too).
func TestIOCallsOf_CountsThisProcesssCalls(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/io is Linux's")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "calls"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	self := []int{os.Getpid()}
	before, ok := ioCallsOf(self)
	if !ok {
		t.Fatal("ioCallsOf could not read this process's /proc/PID/io")
	}
	const n = 300
	buf := []byte("x")
	for range n {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := f.ReadAt(buf, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := ioCallsOf(self)
	writes, reads := after.writes-before.writes, after.reads-before.reads
	if writes < n || writes > n+50 {
		t.Errorf("%d write calls counted, want %d (up to 50 more)", writes, n)
	}
	if reads < n {
		t.Errorf("%d read calls counted, want at least %d", reads, n)
	}
	if _, ok := ioCallsOf([]int{1 << 30}); ok {
		t.Error("ioCallsOf read counts of a process that does not exist")
	}
}
