package checker

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// A lock, one name, as a porcupine model of what its grants may report:
// each grant gets a token above every token granted before it, except
// that a session acquiring a lock it already holds is told its current
// grant again.
//
// Only granted acquires are given to porcupine. An acquire whose outcome
// is unknown may or may not have been granted, with some token above the
// last; had it been, it would only have raised the last token and made
// later grants harder to explain, so leaving it out is exactly as strong
// as modelling both cases. Refused acquires changed nothing.

// lockModelState is the last grant of one name.
type lockModelState struct {
	token   uint64
	session uint64
}

// lockModelInput is a granted acquire: the token and session it reported.
type lockModelInput struct {
	token   uint64
	session uint64
}

// lockModel is the lock model, one partition per name.
func lockModel() porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return lockModelState{} },
		Step: func(state, input, _ interface{}) (bool, interface{}) {
			s, in := state.(lockModelState), input.(lockModelInput)
			switch {
			case in.token > s.token:
				return true, lockModelState(in)
			case in.token == s.token && in.session == s.session:
				return true, s
			}
			return false, s
		},
		Hash: func(state interface{}) uint64 {
			s := state.(lockModelState)
			return s.token*0x9e3779b97f4a7c15 ^ s.session
		},
		DescribeOperation: func(input, _ interface{}) string {
			in := input.(lockModelInput)
			return fmt.Sprintf("acquire() -> token %d session %d", in.token, in.session)
		},
		DescribeState: func(state interface{}) string {
			s := state.(lockModelState)
			if s.token == 0 {
				return "never granted"
			}
			return fmt.Sprintf("last token %d (session %d)", s.token, s.session)
		},
		DescribeOperationMetadata: describeLinMeta,
	}
}
