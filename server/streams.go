package server

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// The API's streaming procedures, read from the services' descriptors so
// that a stream added later is among them.
var (
	// clientStreamPaths are the procedures whose request is a stream
	// (Pipeline, KeepAlive): their bodies are exempt from BodyTimeout and
	// read through a buffer (bufferStreamBodies).
	clientStreamPaths = procedures(func(m protoreflect.MethodDescriptor) bool { return m.IsStreamingClient() })
	// streamPaths are the procedures that stream either way (Pipeline,
	// KeepAlive, Observe): a follower cuts them when it sees the leader
	// it forwarded them to change (forwarding).
	streamPaths = procedures(func(m protoreflect.MethodDescriptor) bool { return m.IsStreamingClient() || m.IsStreamingServer() })
	// waitPaths are the unary procedures that may wait on the leader (an
	// acquire, campaign, claim, latch wait or limiter take: a request
	// with wait_ms or max_wait_ms). Such a call forwarded to a leader that
	// is then cut off would hang until the member transport's pings give
	// up on it; a follower cuts it, as a stream, when it sees the leader
	// change (the SDK retries it at the new leader).
	waitPaths = procedures(func(m protoreflect.MethodDescriptor) bool {
		f := m.Input().Fields()
		return !m.IsStreamingClient() && !m.IsStreamingServer() && (f.ByName("wait_ms") != nil || f.ByName("max_wait_ms") != nil)
	})
)

// cutOnLeaderChange reports whether a follower cuts a call of path that it
// forwarded when it sees the leader change: a stream, or a call that may
// wait there. Other unary calls are bounded by their own deadline and
// their answer is valid even when the leader changed meanwhile (a
// leadership transfer's answer is the change it asked for).
func cutOnLeaderChange(path string) bool { return streamPaths[path] || waitPaths[path] }

// procedures returns the paths ("/package.Service/Method") of the API's
// methods that match.
func procedures(match func(protoreflect.MethodDescriptor) bool) map[string]bool {
	paths := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage(fencedv1.File_fenced_v1_fenced_proto.Package(), func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				if m := svc.Methods().Get(j); match(m) {
					paths["/"+string(svc.FullName())+"/"+string(m.Name())] = true
				}
			}
		}
		return true
	})
	return paths
}
