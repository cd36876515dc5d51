package checker

import (
	"fmt"
	"hash/maphash"

	"github.com/anishathalye/porcupine"

	"github.com/fenced-dev/fenced/check/history"
)

// The fenced kv, one key, as a porcupine model: a register with a
// watermark (docs/design.md §5). A write with token t is accepted when t is at
// least the watermark, bumps the version and raises the watermark to t;
// a write below the watermark is rejected as stale with the watermark as
// the required token and changes nothing.
//
// A write whose outcome is unknown (the client timed out or lost the
// connection) may or may not have been applied. It is given to porcupine
// with no real return: its completion is put after every other operation
// of the history, so it may be linearized at any point after its
// invocation. The model is nondeterministic: stepping such a write yields
// both the state where it was applied and the state where it never was
// (or, below the watermark, where it was rejected), and porcupine keeps
// the set of states that explains the rest of the history. Reads whose
// outcome is unknown, and operations refused for another reason (Fail),
// changed nothing and are left out.

// kvModelState is one key: whether it exists, its value, version and
// watermark.
type kvModelState struct {
	exists  bool
	value   string
	version uint64
	token   uint64
}

// kvModelInput is a kv operation as invoked.
type kvModelInput struct {
	read  bool
	token uint64 // token a write presents
	value string // value a write stores
}

// kvModelOutput is a kv operation's outcome.
type kvModelOutput struct {
	outcome  string // OK, Stale or Unknown for writes; OK or NotFound for reads
	value    string // value read
	version  uint64 // version written or read
	token    uint64 // watermark read (0 if a NotFound read did not report one)
	required uint64 // required token of a stale write
}

// kvStep returns the states the key may be in after s once the operation
// happened with the given outcome; none if that outcome is impossible.
func kvStep(s kvModelState, in kvModelInput, out kvModelOutput) []kvModelState {
	applied := kvModelState{exists: true, value: in.value, version: s.version + 1, token: in.token}
	if in.read {
		switch out.outcome {
		case history.OK:
			if s.exists && s.value == out.value && s.version == out.version && s.token == out.token {
				return []kvModelState{s}
			}
		case history.NotFound:
			if !s.exists && (out.token == 0 || out.token == s.token) {
				return []kvModelState{s}
			}
		}
		return nil
	}
	switch out.outcome {
	case history.OK:
		if in.token >= s.token && out.version == s.version+1 {
			return []kvModelState{applied}
		}
	case history.Stale:
		if in.token < s.token && out.required == s.token {
			return []kvModelState{s}
		}
	case history.Unknown:
		if in.token >= s.token {
			return []kvModelState{s, applied}
		}
		return []kvModelState{s}
	}
	return nil
}

var kvHashSeed = maphash.MakeSeed()

// kvModel is the kv register model, one partition per key.
func kvModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{kvModelState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			next := kvStep(state.(kvModelState), input.(kvModelInput), output.(kvModelOutput))
			out := make([]interface{}, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b interface{}) bool { return a.(kvModelState) == b.(kvModelState) },
		Hash:  func(state interface{}) uint64 { return maphash.Comparable(kvHashSeed, state.(kvModelState)) },
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(kvModelInput), output.(kvModelOutput)
			if in.read {
				if out.outcome == history.NotFound {
					return "read() -> not found"
				}
				return fmt.Sprintf("read() -> %q v%d t%d", out.value, out.version, out.token)
			}
			s := fmt.Sprintf("write(t%d, %q) -> ", in.token, in.value)
			switch out.outcome {
			case history.OK:
				return s + fmt.Sprintf("ok v%d", out.version)
			case history.Stale:
				return s + fmt.Sprintf("stale (required t%d)", out.required)
			}
			return s + out.outcome
		},
		DescribeState:             func(state interface{}) string { return describeKVState(state.(kvModelState)) },
		DescribeOperationMetadata: describeLinMeta,
	}
	return nm.ToModel()
}

func describeKVState(s kvModelState) string {
	if !s.exists {
		return "absent"
	}
	return fmt.Sprintf("%q v%d t%d", s.value, s.version, s.token)
}

// kvOperation converts a history op to porcupine's form; ok is false for
// operations the model leaves out.
func kvOperation(op history.Op) (in kvModelInput, out kvModelOutput, ok bool) {
	switch {
	case op.Kind == history.OpWrite && (op.Outcome == history.OK || op.Outcome == history.Stale || op.Outcome == history.Unknown):
		return kvModelInput{token: op.Token, value: op.Value},
			kvModelOutput{outcome: op.Outcome, version: op.Version, required: op.Required}, true
	case op.Kind == history.OpRead && (op.Outcome == history.OK || op.Outcome == history.NotFound):
		return kvModelInput{read: true},
			kvModelOutput{outcome: op.Outcome, value: op.Value, version: op.Version, token: op.Token}, true
	}
	return in, out, false
}
