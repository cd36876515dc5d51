package filefence_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
	"github.com/fenced-dev/fenced/internal/bounded"
)

// helperTimeout bounds a helper process's life: one still running then is
// killed, so that a stuck helper fails its test instead of hanging the
// package until the test binary's timeout.
const helperTimeout = 2 * time.Minute

// helper returns a command that runs this test binary as the helper kind
// (see TestMain) with the given environment. It is killed after
// helperTimeout or when the test ends.
func helper(t *testing.T, kind string, env ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), append([]string{"FILEFENCE_HELPER=" + kind}, env...)...)
	return cmd
}

// procWrite is one write a writer process made.
type procWrite struct {
	token              fence.Token
	accepted           bool
	invoked, completed int64 // Unix ns, one machine's clock
	value              string
}

// TestDir_Processes runs writer processes that write one file with random
// tokens at the same time, each through its own Dir, and checks the
// history: the watermark is the highest accepted token, the file is from a
// writer of that token, and no write was accepted after a write with a
// higher token had completed.
func TestDir_Processes(t *testing.T) {
	const procs, writes = 6, 30
	path := t.TempDir()
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	errs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmds[i] = helper(t, "writer", "FILEFENCE_DIR="+path, "FILEFENCE_NAME=published.txt",
			"FILEFENCE_WRITES="+strconv.Itoa(writes), "FILEFENCE_SEED="+strconv.FormatInt(time.Now().UnixNano()+int64(i), 10))
		outs[i], errs[i] = new(bytes.Buffer), new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], errs[i]
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var history []procWrite
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s", i, err, errs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			var w procWrite
			var accepted int
			if _, err := fmt.Sscan(sc.Text(), &w.token, &accepted, &w.invoked, &w.completed, &w.value); err != nil {
				t.Fatalf("writer %d printed %q: %v", i, sc.Text(), err)
			}
			w.accepted = accepted == 1
			history = append(history, w)
		}
	}
	if len(history) != procs*writes {
		t.Fatalf("%d writes reported, want %d", len(history), procs*writes)
	}
	var maxTok fence.Token
	var stale int
	for _, w := range history {
		if w.accepted {
			maxTok = max(maxTok, w.token)
		} else {
			stale++
		}
	}
	for _, a := range history {
		if !a.accepted {
			continue
		}
		for _, b := range history {
			if b.accepted && b.token < a.token && b.invoked > a.completed {
				t.Fatalf("write %s (token %d) was accepted after write %s (token %d) had completed", b.value, b.token, a.value, a.token)
			}
		}
	}
	d := openDir(t, path)
	wantMark(t, d, "published.txt", maxTok)
	final := readFile(t, filepath.Join(path, "published.txt"))
	if !strings.HasSuffix(final, "-t"+maxTok.String()) {
		t.Fatalf("final file %q is not from a writer of the highest token %d", final, maxTok)
	}
	if tmp := tempFiles(t, path); len(tmp) != 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	t.Logf("%d writes, %d stale, highest token %d", len(history), stale, maxTok)
}

// TestDir_CrashedWriter kills a writer process in the middle of its write
// and checks that the file and the watermark are unchanged, that its
// temporary file is not taken for data, and that it is cleaned up.
func TestDir_CrashedWriter(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	if err := d.WriteFile(ctx(t), "out", 5, []byte("v5"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := helper(t, "crash", "FILEFENCE_DIR="+path, "FILEFENCE_NAME=out", "FILEFENCE_TOKEN=9")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A helper that never says ready is killed after helperTimeout, which
	// ends this read.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("crash helper said %q, %v\n%s", line, err, stderr.String())
	}
	cmd.Process.Kill()
	cmd.Wait()

	if got := readFile(t, filepath.Join(path, "out")); got != "v5" {
		t.Fatalf("file holds %q after the crash, want v5", got)
	}
	wantMark(t, d, "out", 5)
	tmp := tempFiles(t, path)
	if len(tmp) != 1 {
		t.Fatalf("temporary files after the crash: %v, want the crashed writer's one", tmp)
	}
	if b, _ := os.ReadFile(tmp[0]); !strings.HasPrefix(string(b), "partial") {
		t.Fatalf("temporary file holds %q", b)
	}
	// Its name is never a valid name, so it cannot be taken for data.
	if err := filefence.ValidateName(filepath.Base(tmp[0])); err == nil {
		t.Fatalf("the temporary file's name %q is a valid name", filepath.Base(tmp[0]))
	}

	// Writes go on; Open removes the leftover.
	if err := d.WriteFile(ctx(t), "out", 9, []byte("v9"), 0o644); err != nil {
		t.Fatal(err)
	}
	openDir(t, path)
	if tmp := tempFiles(t, path); len(tmp) != 0 {
		t.Fatalf("temporary files after Open: %v", tmp)
	}
	if got := readFile(t, filepath.Join(path, "out")); got != "v9" {
		t.Fatalf("file holds %q, want v9", got)
	}
}

// TestDir_CleanTempKeepsLiveWriter cleans while a write is in progress: the
// live writer's temporary file is locked and stays.
func TestDir_CleanTempKeepsLiveWriter(t *testing.T) {
	path := t.TempDir()
	d := openDir(t, path)
	writing, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- d.Write(ctx(t), "out", 3, 0o644, func(w io.Writer) error {
			io.WriteString(w, "live ")
			close(writing)
			<-finish
			_, err := io.WriteString(w, "writer")
			return err
		})
	}()
	bounded.Recv(t, "the write started", time.Minute, writing)
	other := openDir(t, path) // Open cleans
	if n, err := other.CleanTemp(); err != nil || n != 0 {
		t.Fatalf("CleanTemp()=%d, %v; want 0 removed", n, err)
	}
	if tmp := tempFiles(t, path); len(tmp) != 1 {
		t.Fatalf("temporary files during the write: %v, want the live writer's", tmp)
	}
	close(finish)
	if err := bounded.Recv(t, "the write", time.Minute, done); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(path, "out")); got != "live writer" {
		t.Fatalf("file holds %q, want %q", got, "live writer")
	}
}
