package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

// Kind names what an Op did.
type Kind string

// Operation kinds. Client operations have an invocation and a completion;
// fault and server events are instantaneous (Invoke == Complete).
const (
	// OpAcquire is an acquire of Name: on success Token and Session.
	// GrantKind says of which primitive ("" or "lock" for the exclusive
	// lock, "permit", "read", "write", "leader"); a semaphore acquire is
	// recorded once per permit, with the permit's Scope ("name/slot") and
	// the semaphore's Capacity.
	OpAcquire Kind = "acquire"
	// OpRelease is a release of Name by Session with Token; Result is
	// released, already_released or not_owned.
	OpRelease Kind = "release"
	// OpExpire is a client letting its grant of Name (Token) expire: it
	// stops renewing. Invoke is when it stopped, Complete when its SDK
	// reported the grant lost.
	OpExpire Kind = "expire"
	// OpWrite is a fenced kv put of Key with Token and Value; on success
	// Version; rejected writes have Outcome "stale" and Required. A
	// worker's cross-scope attack (a key outside its grant's scope) has
	// Target, the attack, and the GrantKind and Scope of the grant whose
	// token it presents; the kv refuses it (Outcome "fail").
	OpWrite Kind = "write"
	// OpRead is a kv get of Key; on success Value, Version and Token (the
	// key's watermark); Outcome "not_found" for a missing key.
	OpRead Kind = "read"
	// OpHijack is a worker's attempt to act for another worker's session
	// (Session) with a wrong secret: Target is the call (HijackRelease of
	// Name, HijackRenew, HijackClose), Value how the victim was chosen
	// ("listed" by Status, or "guessed"), Result a release's answer.
	// Outcome OK means the call took effect: the ownership checker's
	// violation.
	OpHijack Kind = "hijack"
	// OpFault is a fault injected (Fault, Target) or healed (Outcome
	// "healed").
	OpFault Kind = "fault"
	// OpSigningKeys is the cluster's published signing keys, read once
	// every fault is healed (process "final"): Value is the key set's
	// document (fence.KeySet's JSON), by which the signed-grant checker
	// verifies the grants handed out (Op.Signed).
	OpSigningKeys Kind = "signing_keys"
	// OpServerGrant, OpServerRelease and OpServerExpire are the committed
	// history as one server applied it, in apply order (Seq), from its
	// debug log: grants, releases and session expiries. A grant and a
	// release carry the grant's GrantKind, a grant its Scope.
	OpServerGrant   Kind = "server_grant"
	OpServerRelease Kind = "server_release"
	OpServerExpire  Kind = "server_expire"
)

// The kinds of grant (Op.GrantKind), as fence.Kind names them.
const (
	GrantLock   = "lock"
	GrantPermit = "permit"
	GrantRead   = "read"
	GrantWrite  = "write"
	GrantLeader = "leader"
)

// IsLock reports whether op is of the exclusive lock: its GrantKind is
// GrantLock or empty (a history recorded before kinds).
func (op Op) IsLock() bool { return op.GrantKind == "" || op.GrantKind == GrantLock }

// The calls of an OpHijack (its Target).
const (
	HijackRelease = "release"
	HijackRenew   = "renew"
	HijackClose   = "close"
)

// Processes that are not client workers or server nodes.
const (
	// NemesisProcess is the process of the faults the harness injects.
	NemesisProcess = "nemesis"
	// FinalProcess is the process of the reads the harness makes of every
	// key after healing every fault, which the lost-ack checker compares
	// with the writes that were acknowledged.
	FinalProcess = "final"
)

// Outcomes of client operations.
const (
	// OK means the operation succeeded (granted, written, read).
	OK = "ok"
	// Fail means the operation definitely did not take effect (not granted,
	// refused).
	Fail = "fail"
	// Stale is a write rejected for its token.
	Stale = "stale"
	// Unknown means the outcome is not known (timeout, connection lost):
	// the operation may or may not have taken effect.
	Unknown = "unknown"
	// NotFound is a read of a missing key.
	NotFound = "not_found"
)

// Op is one line of the history: one operation of one process, with its
// invocation and completion times in Unix nanoseconds (one machine, one
// clock) and everything needed to check it.
type Op struct {
	// Process is the client process (p1, p2...) or the server node (n1...)
	// or "nemesis" for faults.
	Process string `json:"process"`
	// Kind is what the operation did.
	Kind Kind `json:"kind"`
	// Invoke and Complete are Unix nanoseconds.
	Invoke   int64 `json:"invoke"`
	Complete int64 `json:"complete"`
	// Outcome is OK, Fail, Stale, Unknown or NotFound (client ops), or the
	// fault's state (faults).
	Outcome string `json:"outcome"`

	Name      string `json:"name,omitempty"`       // lock, semaphore, rwlock or election name
	GrantKind string `json:"grant_kind,omitempty"` // kind of grant ("" = lock, permit, read, write, leader)
	Scope     string `json:"scope,omitempty"`      // scope of a grant ("name/slot" for a permit)
	Capacity  int    `json:"capacity,omitempty"`   // semaphore capacity the acquire asked for
	Key       string `json:"key,omitempty"`        // kv key
	Session   uint64 `json:"session,omitempty"`    // session of a grant
	Token     uint64 `json:"token,omitempty"`      // token granted, presented or read
	Required  uint64 `json:"required,omitempty"`   // required token of a stale write
	Value     string `json:"value,omitempty"`      // value written or read
	Version   uint64 `json:"version,omitempty"`    // kv version after a write, or read
	Result    string `json:"result,omitempty"`     // release answer (release, hijack)
	Fault     string `json:"fault,omitempty"`      // fault kind
	Target    string `json:"target,omitempty"`     // fault target (node, process, link), hijack call, write attack
	Seq       uint64 `json:"seq,omitempty"`        // apply order of server events
	Item      uint64 `json:"item,omitempty"`       // queue item (push, claim, ack, nack, final)
	Gen       uint64 `json:"generation,omitempty"` // latch generation
	Count     uint64 `json:"count,omitempty"`      // latch count left after a count-down
	Initial   uint64 `json:"initial,omitempty"`    // latch generation's initial count
	Error     string `json:"error,omitempty"`      // error text of failed or unknown ops
	Signed    string `json:"signed,omitempty"`     // signed grant handed with an OK acquire (fence.Grant.Signed)
}

// History is a whole recorded run.
type History []Op

// WriteJSONLines writes h as one JSON object per line.
func (h History) WriteJSONLines(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, op := range h {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return nil
}

// Read reads JSON lines written by WriteJSONLines (or by workers).
func Read(r io.Reader) (History, error) {
	var h History
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		h = append(h, op)
	}
	return h, sc.Err()
}

// ReadFile reads a history file.
func ReadFile(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Sorted returns h ordered by invocation time (server events by Seq within
// their node), which is the order reports show.
func (h History) Sorted() History {
	out := append(History(nil), h...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Invoke < out[j].Invoke })
	return out
}
