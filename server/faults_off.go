//go:build !fencedfaults

package server

import (
	"log/slog"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Faults are the fault knobs of a test build (build tag fencedfaults; see
// faults_on.go). A production build has none.
type Faults struct{}

// faultState is a node's running faults; a production build has none and
// every method changes nothing.
type faultState struct{}

func newFaultState(Config) *faultState { return &faultState{} }

func (*faultState) warn(*slog.Logger)                             {}
func (*faultState) clock() fence.Clock                            { return fence.SystemClock{} }
func (*faultState) machine(*fsm.Machine)                          {}
func (*faultState) tookOver(uint64)                               {}
func (*faultState) batcher(*grantBatcher)                         {}
func (*faultState) reported(g fence.Grant) fence.Grant            { return g }
func (*faultState) rewritesGrants() bool                          { return false }
func (*faultState) latchDone(count uint64) bool                   { return count == 0 }
func (*faultState) oldPipeline(uint64, *fencedv1.QueueCall) error { return nil }

func (*faultState) oldPipelineCall(uint64) error { return nil }

func (*faultState) pipelineCalls(all []fencedv1.PipelineCallKind) []fencedv1.PipelineCallKind {
	return all
}
