package server

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"google.golang.org/protobuf/proto"
)

// refuseUnknown returns an error matching fence.ErrInvalidArgument if
// req, a client's request (what names it), holds a field or an enum value
// this server does not know: a newer client set it, and a server that
// ignored it would do something other than what was asked (claim one item
// where a batch was asked for, or drop a condition). Nothing is done for
// such a request. A request this build knows costs the walk only.
func refuseUnknown(what string, req proto.Message) error {
	where := fsm.UnknownIn(req)
	if where == "" {
		return nil
	}
	return fmt.Errorf("%w: %s has a field this server does not know (%s): the client is newer than this server; upgrade the server, or do not use what needs it (docs/operations.md, \"Upgrades\"); nothing was done", fence.ErrInvalidArgument, what, where)
}
