package fsm

import "google.golang.org/protobuf/proto"

// UnknownIn describes the first field, or enum value, of m or of a message
// anywhere in it that this build does not know ("field 15 of
// fenced.v1.ClaimRequest"), or returns "" when it knows them all. The
// replicated format is refused on it (a newer release wrote what this
// build would apply without its fields); the server also refuses client
// requests on it, so that a field a newer client sets is never silently
// ignored.
func UnknownIn(m proto.Message) string {
	return unknownIn(m.ProtoReflect())
}
