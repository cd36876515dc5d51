package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// snapshotService serves SnapshotService: a consistent copy of the whole
// state for `fenced snapshot save` (docs/operations.md, "Backup and
// restore"). The restore is offline and not here.
type snapshotService struct{ s *Server }

var _ fencedv1connect.SnapshotServiceHandler = (*snapshotService)(nil)

// Save implements SnapshotService.Save. The serving leader (a follower
// forwards the call) waits until every entry committed before the call is
// applied (a barrier), then encodes the state under the state machine's
// lock, so the copy is the state after one applied index: no command half
// in it. Needs admin (needOf's default); audited.
func (h *snapshotService) Save(ctx context.Context, _ *connect.Request[fencedv1.SaveSnapshotRequest]) (*connect.Response[fencedv1.SaveSnapshotResponse], error) {
	s := h.s
	term := s.serving.Load()
	if term == 0 {
		return nil, toConnect(fmt.Errorf("%w: node %s is not a serving leader; retry once a leader has taken over", errUnavailable, s.cfg.Raft.NodeID))
	}
	if err := s.node.Barrier(ctx); err != nil {
		return nil, toConnect(err)
	}
	info := &fencedv1.SnapshotInfo{FormatVersion: fsm.FormatVersion, Term: term, SavedAtUnixMs: time.Now().UnixMilli(), Node: s.cfg.Raft.NodeID}
	var state []byte
	var err error
	s.sm.read(func(m *fsm.Machine) {
		state, err = m.Snapshot()
		info.Index = s.sm.applied
		info.Issuer, info.LastToken, info.ReservedToken = m.Issuer(), uint64(m.LastToken()), uint64(m.ReservedToken())
		info.Sessions = uint32(m.SessionCount())
		info.Lineage = lineageProto(m)
	})
	if err != nil {
		return nil, toConnect(fmt.Errorf("encode the state: %w", err))
	}
	if info.Issuer == "" {
		return nil, toConnect(fmt.Errorf("%w: the cluster has no issuer yet", fence.ErrInvalidArgument))
	}
	sum := sha256.Sum256(state)
	info.StateSha256 = sum[:]
	s.log.Info("snapshot saved", "index", info.Index, "last_token", info.LastToken, "bytes", len(state))
	return connect.NewResponse(&fencedv1.SaveSnapshotResponse{Info: info, State: state}), nil
}

// Lineage implements SnapshotService.Lineage: the issuer and the restores
// it descends from, read from the state (a linearizable read on the
// leader, readPaths).
func (h *snapshotService) Lineage(ctx context.Context, _ *connect.Request[fencedv1.LineageRequest]) (*connect.Response[fencedv1.LineageResponse], error) {
	out := &fencedv1.LineageResponse{}
	h.s.sm.read(func(m *fsm.Machine) {
		out.Issuer = m.Issuer()
		out.Restores = lineageProto(m)
	})
	return connect.NewResponse(out), nil
}

// lineageProto is the API form of m's lineage.
func lineageProto(m *fsm.Machine) []*fencedv1.IssuerEpoch {
	var out []*fencedv1.IssuerEpoch
	for _, e := range m.Lineage() {
		out = append(out, &fencedv1.IssuerEpoch{
			Issuer: e.GetIssuer(), LastToken: e.GetLastToken(), ReservedToken: e.GetReservedToken(),
			SnapshotIndex: e.GetSnapshotIndex(), SavedAtUnixMs: e.GetSavedAtUnixMs(), TokenFloor: e.GetTokenFloor(),
			RestoredAtUnixMs: e.GetRestoredAtUnixMs(), NewIssuer: e.GetNewIssuer(),
		})
	}
	return out
}
