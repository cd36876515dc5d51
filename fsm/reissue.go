package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Reissue describes a restore (docs/operations.md, "Restore"): the state
// of a snapshot becomes the first state of a new issuer epoch whose tokens
// are all above Floor.
type Reissue struct {
	// Floor is the new counter: the first token issued is Floor+1. It must
	// be at least the snapshot's last token and its token reservation,
	// and should be at least the highest token any resource has seen
	// (tokens issued after the save are in no snapshot).
	Floor fence.Token
	// RestoredAtUnixMs is when the restore runs (the restoring machine's
	// clock; recorded in the lineage, display only).
	RestoredAtUnixMs int64
	// SnapshotIndex and SavedAtUnixMs describe the snapshot (lineage).
	SnapshotIndex uint64
	SavedAtUnixMs int64
}

// Restored returns the state of a cluster restored from snapshot and the
// issuer it starts: fence.NextIssuerEpoch of the snapshot's, with the old
// issuer appended to the lineage. It keeps what outlives a session, the
// fenced kv (values, versions and watermarks), and drops what belongs to
// the old issuer's clients and members: every session (so every grant,
// waiter, permit and lock delay), the kv's de-duplication table, the
// signing keys (the restored cluster's first leader creates a new one) and
// the node addresses (its members register again). The leadership term
// starts again at 0, since the new cluster's raft terms do. A snapshot that
// does not restore, or a floor below its last token or reservation or
// above the maximum, is refused.
func Restored(snapshot []byte, r Reissue) ([]byte, string, error) {
	old := New(nil)
	if err := old.Restore(snapshot); err != nil {
		return nil, "", err
	}
	if old.issuer == "" {
		return nil, "", fmt.Errorf("%w: the snapshot has no issuer (a cluster that never elected a leader): nothing to restore", fence.ErrInvalidArgument)
	}
	high := max(old.tokens.last, old.tokens.reserved)
	switch {
	case r.Floor > fence.MaxToken:
		return nil, "", fmt.Errorf("%w: token floor %d is above the maximum token %d", fence.ErrInvalidArgument, r.Floor, fence.MaxToken)
	case r.Floor < high:
		return nil, "", fmt.Errorf("%w: token floor %d is below the snapshot's last token %d or its reservation %d: the restored cluster could issue tokens the old one handed out", fence.ErrInvalidArgument, r.Floor, old.tokens.last, old.tokens.reserved)
	}
	issuer := fence.NextIssuerEpoch(old.issuer)
	st := &statev1.State{
		FormatVersion: FormatVersion,
		Issuer:        issuer,
		LastToken:     uint64(r.Floor),
		LastSession:   old.lastSession,
		Lineage: append(old.Lineage(), &statev1.IssuerEpoch{
			Issuer:           old.issuer,
			LastToken:        uint64(old.tokens.last),
			ReservedToken:    uint64(old.tokens.reserved),
			SnapshotIndex:    r.SnapshotIndex,
			SavedAtUnixMs:    r.SavedAtUnixMs,
			TokenFloor:       uint64(r.Floor),
			RestoredAtUnixMs: r.RestoredAtUnixMs,
			NewIssuer:        issuer,
		}),
	}
	old.kv.snapshot(st)
	st.KvReplies = nil
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	if err != nil {
		return nil, "", fmt.Errorf("encode the restored state: %w", err)
	}
	// What the restored cluster will load must restore.
	if err := New(nil).Restore(out); err != nil {
		return nil, "", fmt.Errorf("the restored state does not restore: %w", err)
	}
	return out, issuer, nil
}

// Lineage returns the issuers this state was restored from, oldest first;
// the last entry's NewIssuer is the cluster's issuer. Empty for a cluster
// that was never restored.
func (m *Machine) Lineage() []*statev1.IssuerEpoch {
	out := make([]*statev1.IssuerEpoch, len(m.lineage))
	for i, e := range m.lineage {
		out[i] = proto.Clone(e).(*statev1.IssuerEpoch)
	}
	return out
}
