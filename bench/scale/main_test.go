package main

import (
	"os"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// TestMain removes the fenced binaries the tests built when they are done.
func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
