package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// MaxValueBytes is the largest value the fenced kv stores.
const MaxValueBytes = 1 << 20

// kvStore is the fenced kv: every key ever written (deleted ones as
// tombstones) and the remembered results of recent writes by request id.
// It is a snapshot section; it binds nothing to sessions.
type kvStore struct {
	m       *Machine
	entries map[string]*kvEntry
	replies kvReplies
	bytes   uint64 // keys plus values of every entry, for KVLimits
}

var _ section = (*kvStore)(nil)

func newKVStore(m *Machine) *kvStore {
	return &kvStore{m: m, entries: make(map[string]*kvEntry)}
}

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
// refused: a *fence.ScopeMismatchError (a scoped write whose token is not
// a live grant's for the key's scope), a *fence.StaleTokenError, a
// *fence.VersionMismatchError or an invalid argument.
type KVResult struct {
	// Version is the key's version after the write.
	Version uint64
	// Token is the key's watermark after the write.
	Token fence.Token
	// Deleted reports a delete that removed an existing key.
	Deleted bool
}

func (kv *kvStore) write(w *statev1.KVWrite) Result {
	m := kv.m
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
	if s := w.GetScope(); s != "" {
		if !w.GetScoped() {
			return Result{Err: fmt.Errorf("%w: a kv write with a scope must be scoped", fence.ErrInvalidArgument)}
		}
		if err := fence.ValidateName(s); err != nil {
			return Result{Err: fmt.Errorf("scope: %w", err)}
		}
	}
	if len(w.GetRequestId()) > maxRequestIDLen {
		return Result{Err: fmt.Errorf("%w: request id is %d bytes, longer than %d", fence.ErrInvalidArgument, len(w.GetRequestId()), maxRequestIDLen)}
	}
	if id := w.GetRequestId(); id != "" {
		if res, ok := kv.replies.get(id); ok {
			return Result{KV: res}
		}
	}
	if tok > m.tokens.last {
		return Result{Err: fmt.Errorf("%w: token %d was never issued by this cluster (the last token issued is %d)", fence.ErrInvalidToken, tok, m.tokens.last)}
	}
	e := kv.entries[key]
	if e == nil {
		e = &kvEntry{}
	}
	// A token below the watermark is stale whatever its scope; one at or
	// above it must still be a live grant's for the key's scope. The
	// unfenced-kv test fault skips both checks, the unscoped-kv one the
	// scope check.
	if tok < e.token && !m.faults.acceptStale() {
		return Result{Err: &fence.StaleTokenError{Object: key, Presented: tok, Required: e.token}}
	}
	if w.GetScoped() && !m.faults.skipScope() {
		if err := kv.checkScope(key, w.GetScope(), tok); err != nil {
			return Result{Err: err}
		}
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
	if err := kv.checkLimits(w, e); err != nil {
		return Result{Err: err}
	}
	existed := e.exists
	kv.bytes -= uint64(len(e.value))
	if kv.entries[key] == nil {
		kv.bytes += uint64(len(key))
	}
	e.token = max(e.token, tok)
	e.version++
	if w.GetDelete() {
		e.value, e.exists = nil, false
	} else {
		e.value, e.exists = append([]byte(nil), w.GetValue()...), true
	}
	kv.bytes += uint64(len(e.value))
	kv.entries[key] = e
	res := KVResult{Version: e.version, Token: e.token, Deleted: w.GetDelete() && existed}
	if id := w.GetRequestId(); id != "" {
		kv.replies.put(id, res)
	}
	return Result{KV: res}
}

// checkScope is the kv scope rule (docs/design.md §10): a write of key
// with token tok is accepted only while tok is the token of a grant in
// force (the live-grant index) whose scope covers the write's scope: the
// key, or mapped, the scope the leader's --kv-scope mapping gave it. A
// released, expired or revoked holder's token writes nothing, nor does a
// token of another scope, even one above the key's watermark, nor a read
// grant's (of a read/write lock): it is authority for reading only.
func (kv *kvStore) checkScope(key, mapped string, tok fence.Token) error {
	need := key
	if mapped != "" {
		need = mapped
	}
	g, ok := kv.m.live.get(tok)
	if ok && g.kind.of() != fence.KindRead && fence.ScopeCovers(g.scope, need) {
		return nil
	}
	return &fence.ScopeMismatchError{Object: key, Required: need, Presented: tok, Kind: g.kind.of(), Scope: g.scope}
}

// KV returns a key of the fenced kv.
func (m *Machine) KV(key string) KVEntry {
	e := m.kv.entries[key]
	if e == nil {
		return KVEntry{}
	}
	return KVEntry{Value: e.value, Version: e.version, Token: e.token, Exists: e.exists}
}

// snapshot implements section.
func (kv *kvStore) snapshot(st *statev1.State) {
	for _, k := range sortedKeys(kv.entries) {
		e := kv.entries[k]
		st.Kv = append(st.Kv, &statev1.KVEntry{Key: k, Value: e.value, Token: uint64(e.token), Version: e.version, Exists: e.exists})
	}
	for _, id := range kv.replies.order {
		r := kv.replies.byID[id]
		st.KvReplies = append(st.KvReplies, &statev1.KVReply{RequestId: id, Version: r.Version, Token: uint64(r.Token), Deleted: r.Deleted})
	}
}

// restore implements section.
func (kv *kvStore) restore(st *statev1.State) error {
	for _, e := range st.GetKv() {
		kv.entries[e.GetKey()] = &kvEntry{value: e.GetValue(), token: fence.Token(e.GetToken()), version: e.GetVersion(), exists: e.GetExists()}
		kv.bytes += uint64(len(e.GetKey()) + len(e.GetValue()))
	}
	for _, r := range st.GetKvReplies() {
		kv.replies.put(r.GetRequestId(), KVResult{Version: r.GetVersion(), Token: fence.Token(r.GetToken()), Deleted: r.GetDeleted()})
	}
	return nil
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
