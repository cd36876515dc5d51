package client_test

import (
	"github.com/fenced-dev/fenced/internal/proctest"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/fenced-dev/fenced/internal/testserver"
)

// TestMain runs the tests and examples, then stops what the examples ran
// against.
func TestMain(m *testing.M) {
	code := proctest.Main(m)
	examples.stop()
	os.Exit(code)
}

// exampleEnv is what the Examples run against, started by the first one
// that needs it: a real single-node fenced server, and an HTTP resource
// standing for the reports service of ExampleMutex_Lock.
type exampleEnv struct {
	once    sync.Once
	dir     string
	server  *testserver.Server
	reports *httptest.Server
}

var examples exampleEnv

func (e *exampleEnv) start() {
	e.once.Do(func() {
		dir, err := os.MkdirTemp("", "fenced-client-examples-")
		if err != nil {
			log.Fatal(err)
		}
		e.dir = dir
		if e.server, err = testserver.Launch(dir); err != nil {
			log.Fatal(err)
		}
		e.reports = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPut || r.Header.Get("X-Fencing-Token") == "" {
				http.Error(w, "want a PUT with a fencing token", http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
	})
}

// stop stops whatever start started.
func (e *exampleEnv) stop() {
	if e.reports != nil {
		e.reports.Close()
	}
	if e.server != nil {
		e.server.Stop()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// endpoints returns the examples' server address as a Client's endpoint
// list.
func endpoints() []string {
	examples.start()
	return []string{examples.server.Addr()}
}

// reportsURL returns the base URL of the examples' reports service.
func reportsURL() string {
	examples.start()
	return examples.reports.URL
}
