package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// A backup file (`fenced snapshot save`, docs/operations.md) is one header
// line and a body:
//
//	fenced-snapshot 1 sha256=HEX bytes=N
//
// then N bytes, a fenced.v1.SaveSnapshotResponse (the state and its
// SnapshotInfo) whose SHA-256 is HEX. ReadSnapshot refuses a file of
// another format version, a short or long one and one whose checksum
// (of the body, or of the state inside it) does not match.
const (
	snapshotMagic = "fenced-snapshot"
	// SnapshotFileVersion is the backup file format this build writes and
	// reads.
	SnapshotFileVersion = 1
	// maxSnapshotHeader bounds the header line.
	maxSnapshotHeader = 256
)

// ErrBadSnapshot is the error of a backup file that cannot be trusted:
// damaged, truncated, or of a format this build does not read.
var ErrBadSnapshot = errors.New("client: not a usable fenced snapshot file")

// Snapshot is a saved copy of a cluster's whole state.
type Snapshot struct {
	// Info describes the state: issuer, last token, reservation, raft
	// index, when and where it was saved.
	Info *fencedv1.SnapshotInfo
	// State is the encoded replicated state.
	State []byte
}

// SaveSnapshot asks the leader for a consistent copy of the whole state
// (SnapshotService.Save): the state after every entry committed before
// the call. It needs admin and is audited. A retry saves again, which
// changes nothing in the cluster.
func (c *Client) SaveSnapshot(ctx context.Context) (*Snapshot, error) {
	var out *fencedv1.SaveSnapshotResponse
	err := c.retry(ctx, "save snapshot", max(c.requestTimeout, 30*time.Second), func(ctx context.Context, ep *endpoint) error {
		r, err := ep.snapshots.Save(ctx, connect.NewRequest(&fencedv1.SaveSnapshotRequest{}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Info: out.GetInfo(), State: out.GetState()}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// check verifies the state against the checksum in its Info.
func (s *Snapshot) check() error {
	sum := sha256.Sum256(s.State)
	if s.Info == nil || !bytes.Equal(sum[:], s.Info.GetStateSha256()) {
		return fmt.Errorf("%w: the state's SHA-256 does not match the one saved with it", ErrBadSnapshot)
	}
	return nil
}

// WriteTo writes s as a backup file.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(&fencedv1.SaveSnapshotResponse{Info: s.Info, State: s.State})
	if err != nil {
		return 0, fmt.Errorf("encode snapshot: %w", err)
	}
	sum := sha256.Sum256(body)
	n, err := fmt.Fprintf(w, "%s %d sha256=%s bytes=%d\n", snapshotMagic, SnapshotFileVersion, hex.EncodeToString(sum[:]), len(body))
	if err != nil {
		return int64(n), err
	}
	m, err := w.Write(body)
	return int64(n + m), err
}

// ReadSnapshot reads a backup file WriteTo wrote. Its errors match
// ErrBadSnapshot when the file is not one, is of another format version,
// is shorter or longer than its header says, or fails its checksum.
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, maxSnapshotHeader)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no header line (%v): is this a file of fenced snapshot save?", ErrBadSnapshot, err)
	}
	f := strings.Fields(string(line))
	if len(f) != 4 || f[0] != snapshotMagic || !strings.HasPrefix(f[2], "sha256=") || !strings.HasPrefix(f[3], "bytes=") {
		return nil, fmt.Errorf("%w: the header %q is not \"%s VERSION sha256=HEX bytes=N\": is this a file of fenced snapshot save?", ErrBadSnapshot, strings.TrimSpace(string(line)), snapshotMagic)
	}
	if f[1] != strconv.Itoa(SnapshotFileVersion) {
		return nil, fmt.Errorf("%w: the file is in snapshot format version %s; this build reads version %d: restore it with the fenced release that saved it, or a newer one", ErrBadSnapshot, f[1], SnapshotFileVersion)
	}
	want, err := hex.DecodeString(strings.TrimPrefix(f[2], "sha256="))
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%w: the header's checksum %q is not a SHA-256 in hexadecimal", ErrBadSnapshot, f[2])
	}
	size, err := strconv.ParseInt(strings.TrimPrefix(f[3], "bytes="), 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("%w: the header's size %q is not a number of bytes", ErrBadSnapshot, f[3])
	}
	body, err := io.ReadAll(io.LimitReader(br, size+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	switch {
	case int64(len(body)) < size:
		return nil, fmt.Errorf("%w: the file is truncated: %d bytes after the header, the header says %d", ErrBadSnapshot, len(body), size)
	case int64(len(body)) > size:
		return nil, fmt.Errorf("%w: the file has bytes after the %d its header announces", ErrBadSnapshot, size)
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("%w: checksum mismatch: the body's SHA-256 is %x, the header says %x: the file is damaged", ErrBadSnapshot, sum, want)
	}
	var msg fencedv1.SaveSnapshotResponse
	if err := proto.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("%w: the body does not decode: %v", ErrBadSnapshot, err)
	}
	s := &Snapshot{Info: msg.GetInfo(), State: msg.GetState()}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Lineage returns the cluster's issuer and the restores it descends from,
// oldest first: each names the issuer whose backup was restored, that
// backup's last token and the floor above which the new issuer's tokens
// start. Empty for a cluster never restored. Needs read on some name.
func (c *Client) Lineage(ctx context.Context) (string, []*fencedv1.IssuerEpoch, error) {
	var out *fencedv1.LineageResponse
	err := c.retry(ctx, "lineage", c.requestTimeout, func(ctx context.Context, ep *endpoint) error {
		r, err := ep.snapshots.Lineage(ctx, connect.NewRequest(&fencedv1.LineageRequest{}))
		if err == nil {
			out = r.Msg
		}
		return err
	})
	if err != nil {
		return "", nil, err
	}
	return out.GetIssuer(), out.GetRestores(), nil
}
