package filefence_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
)

// The test binary doubles as the writer processes of the multi-process
// tests: started with FILEFENCE_HELPER set, it runs a helper instead of the
// tests.
func TestMain(m *testing.M) {
	switch os.Getenv("FILEFENCE_HELPER") {
	case "":
		os.Exit(m.Run())
	case "writer":
		os.Exit(writerMain())
	case "crash":
		os.Exit(crashMain())
	default:
		fmt.Fprintln(os.Stderr, "unknown FILEFENCE_HELPER", os.Getenv("FILEFENCE_HELPER"))
		os.Exit(2)
	}
}

// writerMain writes FILEFENCE_WRITES times to FILEFENCE_NAME in
// FILEFENCE_DIR with random, rising tokens, and prints one line per write:
//
//	token accepted(0|1) invoked-unix-ns completed-unix-ns value
func writerMain() int {
	d, err := filefence.Open(os.Getenv("FILEFENCE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer d.Close()
	name := os.Getenv("FILEFENCE_NAME")
	writes, _ := strconv.Atoi(os.Getenv("FILEFENCE_WRITES"))
	seed, _ := strconv.ParseUint(os.Getenv("FILEFENCE_SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := 0; i < writes; i++ {
		// Tokens rise with i, with overlap between the processes, so that
		// accepted and stale writes interleave all along.
		tok := fence.Token(1 + 4*i + rng.IntN(20))
		value := fmt.Sprintf("p%d-%d-t%d", os.Getpid(), i, tok)
		invoked := time.Now().UnixNano()
		err := d.WriteFile(context.Background(), name, tok, []byte(value), 0o644)
		completed := time.Now().UnixNano()
		accepted := 1
		if err != nil {
			if _, ok := err.(*fence.StaleTokenError); !ok {
				fmt.Fprintln(os.Stderr, "write:", err)
				return 2
			}
			accepted = 0
		}
		fmt.Fprintf(out, "%d %d %d %d %s\n", tok, accepted, invoked, completed, value)
	}
	return 0
}

// crashMain starts a write of FILEFENCE_NAME in FILEFENCE_DIR with token
// FILEFENCE_TOKEN, writes part of the content, prints "ready" and waits to
// be killed.
func crashMain() int {
	d, err := filefence.Open(os.Getenv("FILEFENCE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tok, _ := strconv.ParseUint(os.Getenv("FILEFENCE_TOKEN"), 10, 64)
	err = d.Write(context.Background(), os.Getenv("FILEFENCE_NAME"), fence.Token(tok), 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "partial content of a writer that "); err != nil {
			return err
		}
		fmt.Println("ready")
		time.Sleep(time.Hour) // killed here
		return fmt.Errorf("not killed")
	})
	fmt.Fprintln(os.Stderr, "the write returned:", err)
	return 2
}
