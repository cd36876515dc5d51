package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// MaxValueBytes is the largest value the fenced kv stores.
const MaxValueBytes = 1 << 20

// kvEntry is one key of the fenced kv. A deleted key stays as a tombstone
// (exists false) that keeps its watermark, so a stale writer cannot
// recreate it, and its version, so versions never repeat.
type kvEntry struct {
	value   []byte
	token   fence.Token
	version uint64
	exists  bool
}

// KVEntry describes a key of the fenced kv.
type KVEntry struct {
	// Value is the stored value; nil when the key does not exist.
	Value []byte
	// Version counts the key's writes; it never repeats, across deletes.
	Version uint64
	// Token is the key's watermark: the highest token accepted for it.
	Token fence.Token
	// Exists is false for a key never written or deleted.
	Exists bool
}

// KVResult is the outcome of a kv write. Err is set when the write was
// refused: a *fence.StaleTokenError, a *fence.VersionMismatchError or an invalid
// argument.
type KVResult struct {
	// Version is the key's version after the write.
	Version uint64
	// Token is the key's watermark after the write.
	Token fence.Token
	// Deleted reports a delete that removed an existing key.
	Deleted bool
}

func (m *Machine) kvWrite(w *statev1.KVWrite) Result {
	key, tok := w.GetKey(), fence.Token(w.GetToken())
	if err := fence.ValidateName(key); err != nil {
		return Result{Err: fmt.Errorf("key: %w", err)}
	}
	if len(w.GetValue()) > MaxValueBytes {
		return Result{Err: fmt.Errorf("%w: value is %d bytes, larger than %d (1 MiB)", fence.ErrInvalidArgument, len(w.GetValue()), MaxValueBytes)}
	}
	if err := fence.ValidateToken(tok); err != nil {
		return Result{Err: err}
	}
	if len(w.GetRequestId()) > maxRequestIDLen {
		return Result{Err: fmt.Errorf("%w: request id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(w.GetRequestId()), maxRequestIDLen)}
	}
	if id := w.GetRequestId(); id != "" {
		if res, ok := m.kvReplies.get(id); ok {
			return Result{KV: res}
		}
	}
	if tok > m.lastToken {
		return Result{Err: fmt.Errorf("%w: token %d was never issued by this cluster (the last token issued is %d)", fence.ErrInvalidToken, tok, m.lastToken)}
	}
	e := m.kv[key]
	if e == nil {
		e = &kvEntry{}
	}
	if tok < e.token && !m.faults.acceptStale() {
		return Result{Err: &fence.StaleTokenError{Object: key, Presented: tok, Required: e.token}}
	}
	if w.GetHasIfVersion() {
		current := e.version
		if !e.exists {
			current = 0
		}
		if w.GetIfVersion() != current {
			return Result{Err: &fence.VersionMismatchError{Object: key, Expected: int64(w.GetIfVersion()), Current: int64(current)}}
		}
	}
	existed := e.exists
	e.token = max(e.token, tok)
	e.version++
	if w.GetDelete() {
		e.value, e.exists = nil, false
	} else {
		e.value, e.exists = append([]byte(nil), w.GetValue()...), true
	}
	m.kv[key] = e
	res := KVResult{Version: e.version, Token: e.token, Deleted: w.GetDelete() && existed}
	if id := w.GetRequestId(); id != "" {
		m.kvReplies.put(id, res)
	}
	return Result{KV: res}
}

// KV returns a key of the fenced kv.
func (m *Machine) KV(key string) KVEntry {
	e := m.kv[key]
	if e == nil {
		return KVEntry{}
	}
	return KVEntry{Value: e.value, Version: e.version, Token: e.token, Exists: e.exists}
}

func (m *Machine) kvSnapshot() []*statev1.KVEntry {
	keys := make([]string, 0, len(m.kv))
	for k := range m.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*statev1.KVEntry, len(keys))
	for i, k := range keys {
		e := m.kv[k]
		out[i] = &statev1.KVEntry{Key: k, Value: e.value, Token: uint64(e.token), Version: e.version, Exists: e.exists}
	}
	return out
}

func (m *Machine) kvRepliesSnapshot() []*statev1.KVReply {
	out := make([]*statev1.KVReply, len(m.kvReplies.order))
	for i, id := range m.kvReplies.order {
		r := m.kvReplies.byID[id]
		out[i] = &statev1.KVReply{RequestId: id, Version: r.Version, Token: uint64(r.Token), Deleted: r.Deleted}
	}
	return out
}

func (m *Machine) kvRestore(entries []*statev1.KVEntry) {
	for _, e := range entries {
		m.kv[e.GetKey()] = &kvEntry{value: e.GetValue(), token: fence.Token(e.GetToken()), version: e.GetVersion(), exists: e.GetExists()}
	}
}

// kvReplyWindow is how many kv write results with a request id the state
// machine remembers for retries.
const kvReplyWindow = 4096

// kvReplies remembers the results of recent kv writes by request id, so a
// retried write is applied once. Eviction is oldest first, deterministic.
type kvReplies struct {
	byID  map[string]KVResult
	order []string
}

func (r *kvReplies) get(id string) (KVResult, bool) {
	res, ok := r.byID[id]
	return res, ok
}

func (r *kvReplies) put(id string, res KVResult) {
	if r.byID == nil {
		r.byID = make(map[string]KVResult)
	}
	r.byID[id] = res
	r.order = append(r.order, id)
	if len(r.order) > kvReplyWindow {
		delete(r.byID, r.order[0])
		r.order = r.order[1:]
	}
}
