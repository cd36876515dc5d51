package server_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// mustMarshal is msg serialized, for the pipelined calls that carry their
// call as bytes.
func mustMarshal(t *testing.T, msg proto.Message) []byte {
	t.Helper()
	raw, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// serializedResult decodes raw, the bytes of the answer r of a pipelined
// call that carries its result serialized, into a T; r must not be an
// error.
func serializedResult[T any, P interface {
	*T
	proto.Message
}](t *testing.T, r *fencedv1.PipelineResult, raw []byte) P {
	t.Helper()
	if e := r.GetError(); e != nil {
		t.Fatalf("call %d failed: %v", r.GetId(), e)
	}
	res := P(new(T))
	if err := proto.Unmarshal(raw, res); err != nil {
		t.Fatalf("call %d: answer is not a %s: %v", r.GetId(), res.ProtoReflect().Descriptor().Name(), err)
	}
	return res
}
