package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Headers of the /v1/kv REST endpoint. (The Connect API sends the fields of
// its errors in the headers of package wire.)
const (
	headerToken          = "X-Fencing-Token"
	headerCurrentVersion = "X-Current-Version"
)

// kvWriteRequest is a put or delete, from either API.
type kvWriteRequest struct {
	key       string
	value     []byte
	token     fence.Token
	ifVersion *uint64
	issuer    string
	delete    bool
	requestID string
}

// kvWrite validates, checks the issuer and proposes a kv write. Refusals
// come back as *fence.ScopeMismatchError, *fence.StaleTokenError, *fence.VersionMismatchError or errors
// matching fence.ErrInvalidArgument, fence.ErrInvalidToken or
// fence.ErrIssuerMismatch.
func (s *Server) kvWrite(ctx context.Context, r kvWriteRequest) (fsm.KVResult, error) {
	if err := fence.ValidateName(r.key); err != nil {
		return fsm.KVResult{}, fmt.Errorf("key: %w", err)
	}
	if len(r.value) > fsm.MaxValueBytes {
		return fsm.KVResult{}, fmt.Errorf("%w: value is %d bytes, larger than %d (1 MiB)", fence.ErrInvalidArgument, len(r.value), fsm.MaxValueBytes)
	}
	if err := fence.ValidateToken(r.token); err != nil {
		return fsm.KVResult{}, err
	}
	if r.issuer != "" {
		var issuer string
		s.sm.read(func(m *fsm.Machine) { issuer = m.Issuer() })
		if r.issuer != issuer {
			return fsm.KVResult{}, fmt.Errorf("%w: token issued by %q, this cluster is %q", fence.ErrIssuerMismatch, r.issuer, issuer)
		}
	}
	if err := validateRequestID(r.requestID); err != nil {
		return fsm.KVResult{}, err
	}
	// Scoped: the token must be a live grant's whose scope covers the key,
	// or the scope this leader's --kv-scope mapping gives it (resolved
	// here, so the state machine stays pure).
	w := &statev1.KVWrite{Key: r.key, Value: r.value, Token: uint64(r.token), Delete: r.delete, RequestId: r.requestID,
		Scoped: true, Scope: kvScopeOf(s.cfg.KVScopes, r.key),
		Limits: &statev1.KVLimits{MaxKeys: s.cfg.Limits.MaxKVKeys, MaxBytes: s.cfg.Limits.MaxKVBytes}}
	if r.ifVersion != nil {
		w.HasIfVersion, w.IfVersion = true, *r.ifVersion
	}
	res, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_KvWrite{KvWrite: w}})
	s.metrics.kvWrites.WithLabelValues(kvOutcome(err)).Inc()
	return res.KV, s.limitErr(err)
}

func kvOutcome(err error) string {
	var vm *fence.VersionMismatchError
	switch {
	case err == nil:
		return "accepted"
	case errors.Is(err, fence.ErrStaleToken):
		return "stale"
	case errors.Is(err, fence.ErrScopeMismatch):
		return "scope_mismatch"
	case errors.As(err, &vm):
		return "version_mismatch"
	}
	return "error"
}

// kvService implements the KVService API.
type kvService struct{ s *Server }

var _ fencedv1connect.KVServiceHandler = (*kvService)(nil)

// Put implements KVServiceHandler.
func (h *kvService) Put(ctx context.Context, req *connect.Request[fencedv1.KVPutRequest]) (*connect.Response[fencedv1.KVPutResponse], error) {
	m := req.Msg
	res, err := h.s.kvWrite(ctx, kvWriteRequest{key: m.Key, value: m.Value, token: fence.Token(m.Token), ifVersion: m.IfVersion, issuer: m.Issuer, requestID: m.RequestId})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.KVPutResponse{Version: res.Version, Token: uint64(res.Token)}), nil
}

// Delete implements KVServiceHandler.
func (h *kvService) Delete(ctx context.Context, req *connect.Request[fencedv1.KVDeleteRequest]) (*connect.Response[fencedv1.KVDeleteResponse], error) {
	m := req.Msg
	res, err := h.s.kvWrite(ctx, kvWriteRequest{key: m.Key, token: fence.Token(m.Token), ifVersion: m.IfVersion, issuer: m.Issuer, delete: true, requestID: m.RequestId})
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&fencedv1.KVDeleteResponse{Deleted: res.Deleted, Token: uint64(res.Token)}), nil
}

// Get implements KVServiceHandler.
func (h *kvService) Get(ctx context.Context, req *connect.Request[fencedv1.KVGetRequest]) (*connect.Response[fencedv1.KVGetResponse], error) {
	if err := fence.ValidateName(req.Msg.Key); err != nil {
		return nil, toConnect(fmt.Errorf("key: %w", err))
	}
	e := h.s.kvGet(req.Msg.Key)
	return connect.NewResponse(&fencedv1.KVGetResponse{Found: e.Exists, Value: e.Value, Version: e.Version, Token: uint64(e.Token)}), nil
}

func (s *Server) kvGet(key string) fsm.KVEntry {
	var e fsm.KVEntry
	s.sm.read(func(m *fsm.Machine) { e = m.KV(key) })
	return e
}
