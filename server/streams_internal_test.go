package server

import (
	"fmt"
	"sort"
	"testing"

	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// The streaming procedures read from the descriptors are the API's
// streams, every one of them, and no unary call: a follower cuts exactly
// these on a leader change, and exempts the client streams' bodies from
// BodyTimeout.
func TestStreams_FromTheDescriptors(t *testing.T) {
	sorted := func(m map[string]bool) string {
		var out []string
		for p := range m {
			out = append(out, p)
		}
		sort.Strings(out)
		return fmt.Sprint(out)
	}
	want := map[string]bool{fencedv1connect.ElectionServiceObserveProcedure: true, fencedv1connect.SessionServiceKeepAliveProcedure: true, fencedv1connect.LockServicePipelineProcedure: true}
	if got := sorted(streamPaths); got != sorted(want) {
		t.Fatalf("streams %s, want %s", got, sorted(want))
	}
	delete(want, fencedv1connect.ElectionServiceObserveProcedure)
	if got := sorted(clientStreamPaths); got != sorted(want) {
		t.Fatalf("client streams %s, want %s", got, sorted(want))
	}
}
