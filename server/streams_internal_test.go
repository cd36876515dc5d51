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
	waits := map[string]bool{
		fencedv1connect.LockServiceAcquireProcedure: true, fencedv1connect.RWLockServiceAcquireProcedure: true,
		fencedv1connect.SemaphoreServiceAcquireProcedure: true, fencedv1connect.ElectionServiceCampaignProcedure: true,
		fencedv1connect.QueueServiceClaimProcedure: true, fencedv1connect.LatchServiceWaitProcedure: true,
		fencedv1connect.LimiterServiceTakeProcedure: true,
	}
	if got := sorted(waitPaths); got != sorted(waits) {
		t.Fatalf("calls that wait %s, want %s", got, sorted(waits))
	}
	for _, p := range []string{fencedv1connect.ClusterServiceTransferLeaderProcedure, fencedv1connect.LockServiceReleaseProcedure} {
		if cutOnLeaderChange(p) {
			t.Errorf("%s is cut on a leader change; only streams and calls that wait are", p)
		}
	}
	delete(want, fencedv1connect.ElectionServiceObserveProcedure)
	if got := sorted(clientStreamPaths); got != sorted(want) {
		t.Fatalf("client streams %s, want %s", got, sorted(want))
	}
}
