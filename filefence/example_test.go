package filefence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/filefence"
)

// A job publishes a file with its token; a job that lost its lock (an
// older token) is rejected and the newer file stays.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "reports-")
	defer os.RemoveAll(dir)

	d, err := filefence.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	// The current holder of the lock (token 34) publishes.
	if err := d.WriteFile(ctx, "daily.csv", 34, []byte("from 34\n"), 0o644); err != nil {
		fmt.Println(err)
	}
	// A former holder wakes up from a pause and publishes with token 33.
	err = d.WriteFile(ctx, "daily.csv", 33, []byte("from 33\n"), 0o644)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("rejected: presented %d, required %d\n", stale.Presented, stale.Required)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "daily.csv"))
	fmt.Print(string(b))
	// Output:
	// rejected: presented 33, required 34
	// from 34
}

// Write streams the content; readers see the old file until the new one
// is complete and accepted.
func ExampleDir_Write() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "state-")
	defer os.RemoveAll(dir)
	d, _ := filefence.Open(dir)
	defer d.Close()

	state := map[string]int{"processed": 1200}
	err := d.Write(ctx, "state.json", 7, 0o600, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(state)
	})
	fmt.Println(err)
	mark, _ := d.Watermark("state.json")
	fmt.Println("watermark", mark)
	// Output:
	// <nil>
	// watermark 7
}

// Remove keeps the watermark: a stale job cannot publish the file again.
func ExampleDir_Remove() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "out-")
	defer os.RemoveAll(dir)
	d, _ := filefence.Open(dir)
	defer d.Close()

	d.WriteFile(ctx, "result", 5, []byte("done"), 0o644)
	fmt.Println(d.Remove(ctx, "result", 6))
	fmt.Println(d.WriteFile(ctx, "result", 5, []byte("done again"), 0o644))
	// Output:
	// <nil>
	// fence: stale token 5 for "result": the object has accepted token 6; a write needs a token of at least 6
}

// Do runs a job's own code under the file's lock, after the token check:
// here it renders the report from the previous one and publishes it with
// WriteFile, which runs under the lock Do holds.
func ExampleDir_Do() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "reports-")
	defer os.RemoveAll(dir)
	d, err := filefence.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()

	appendLine := func(token fence.Token, line string) error {
		return d.Do(ctx, "log.txt", token, func(ctx context.Context) error {
			old, _ := os.ReadFile(filepath.Join(dir, "log.txt")) // no other step can write it now
			return d.WriteFile(ctx, "log.txt", token, append(old, line+"\n"...), 0o644)
		})
	}
	fmt.Println(appendLine(7, "first, by 7"))
	fmt.Println(appendLine(8, "second, by 8"))
	fmt.Println(errors.Is(appendLine(7, "late, by 7"), fence.ErrStaleToken))
	b, _ := os.ReadFile(filepath.Join(dir, "log.txt"))
	fmt.Print(string(b))
	// Output:
	// <nil>
	// <nil>
	// true
	// first, by 7
	// second, by 8
}
