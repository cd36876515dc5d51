package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/fenced-dev/fenced/internal/durable"
)

// Verifying the write-ahead log before it is opened.
//
// raft-wal (v0.4.1, segment/writer.go and reader.go) writes the entries of
// one append as frames (8-byte header: type, length) followed by a commit
// frame holding the CRC-32C of every byte written since the previous
// commit frame, and fsyncs; an append is acknowledged only after that. It
// checks a checksum in one place only: when it reopens the tail segment,
// the last batch's (recoverTail). A last batch whose CRC does not match,
// or a frame header that does not parse, is taken for a torn write — a
// crash before the fsync, so never acknowledged — and the log is cut back
// to the commit frame before it. Everything else is trusted: earlier
// batches and sealed segments are never verified, reads do not verify, and
// a garbled frame header in the middle of the tail ends the recovery there,
// silently dropping every batch after it.
//
// checkLog closes that gap. It reads every segment and verifies every
// batch against its commit frame's CRC, and tells a torn write from damage
// the way the write order and the machine allow:
//
//   - A torn write can only hit the last batch, the one whose fsync did
//     not finish, so nothing intact can follow it. Damage in a sealed
//     segment, or in the tail followed by an intact batch (a later commit
//     frame whose CRC matches the bytes since an earlier commit frame), is
//     refused.
//   - Only a power loss or an operating-system crash tears a write: after
//     a crash (or kill -9) of the process, what it wrote is still in the
//     kernel's page cache and reads back whole; a write it did not finish
//     ends in zeros at a page boundary (the segment is preallocated with
//     zeros), never in a bad checksum or a garbled frame header. The boot
//     id of the machine (/proc/sys/kernel/random/boot_id) is recorded
//     beside the log (boot-id) each time it is opened, so a garbled last
//     batch is refused too while the machine has not restarted since: it
//     is damage, and the batch may have been acknowledged.
//   - After a restart of the machine (another boot id, or none recorded)
//     a garbled last batch is accepted as raft-wal accepts it, with a
//     warning: a torn write cannot be told from a damaged last batch that
//     had been acknowledged, and what protects the tokens then is the
//     token reservation (docs/design.md §2), not the log. So is a last
//     write cut off by zeros or by the end of the file, in any boot.
//
// A dropped write is cleared (zeros, fsynced) before raft-wal opens the
// log: raft-wal appends over it but would leave what lies beyond its next
// write, which a later start would take for damage. Every refusal wraps
// ErrDamaged and names the file, the byte offset and the first entry
// affected.

// maxTornStarts is how many of the nearest commit-frame lookalikes before
// a candidate commit frame intactAfter tries as the start of its batch
// (data may hold bytes that look like a commit frame).
const maxTornStarts = 16

// Layout of a raft-wal segment (segment/format.go).
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walMagic          = 0x58eb6b0d
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkLog verifies every segment of the log in dir (segs, from raft-wal's
// metadata) before raft-wal opens it. It returns an error wrapping
// ErrDamaged for damage raft-wal would miss or silently cut away, and logs
// a warning for a torn last batch it will drop.
func checkLog(dir string, segs []types.SegmentInfo, log *slog.Logger) error {
	same := sameBoot(dir)
	for i, si := range segs {
		tail := si.SealTime.IsZero() && i == len(segs)-1
		path := filepath.Join(dir, segment.FileName(si))
		buf, err := os.ReadFile(path)
		if tail && os.IsNotExist(err) {
			continue // raft-wal recreates a tail lost before its first fsync
		}
		if err != nil {
			return fmt.Errorf("%w: read raft log segment: %w", ErrDamaged, err)
		}
		sc := scanSegment(buf)
		first := func(n int) uint64 { return si.BaseIndex + uint64(n) }
		if sc.bad < 0 && sc.committed > 0 {
			if err := checkSegmentHeader(buf, si); err != nil {
				return fmt.Errorf("%w: raft log segment %s: %v", ErrDamaged, path, err)
			}
		}
		if !tail {
			if sc.bad >= 0 {
				return fmt.Errorf("%w: sealed raft log segment %s is damaged at byte %d (%s), in entry %d or after; refusing to start: restore the data dir from a backup, or remove it and let this member rejoin its cluster",
					ErrDamaged, path, sc.bad, sc.why, first(sc.committed))
			}
			if si.MaxIndex > 0 && (sc.committed == 0 || first(sc.committed-1) < si.MaxIndex) {
				return fmt.Errorf("%w: sealed raft log segment %s holds entries %d to %d, but the log's metadata says it ends at %d; refusing to start",
					ErrDamaged, path, si.BaseIndex, first(sc.committed)-1, si.MaxIndex)
			}
			continue
		}
		junk := lastNonZero(buf) >= sc.batchStart
		if sc.bad < 0 && !junk {
			continue
		}
		if sc.bad >= 0 {
			if at, ok := intactAfter(buf, sc.bad, sc.batchStart); ok {
				return fmt.Errorf("%w: raft log segment %s is damaged at byte %d (%s), in entry %d or after, and an intact batch follows at byte %d, so this is not a torn write; refusing to start: restore the data dir from a backup, or remove it and let this member rejoin its cluster",
					ErrDamaged, path, sc.bad, sc.why, first(sc.committed), at)
			}
			if sc.garbled && same {
				return fmt.Errorf("%w: raft log segment %s is damaged at byte %d (%s), in its last batch, from entry %d on; this machine has not restarted since the log was last written, and only a power loss or an operating-system crash tears a write (after a crash of the process what it wrote is still in the kernel's cache), so this is damage, not a torn write, and the batch may have been acknowledged; refusing to start: restore the data dir from a backup, or remove it and let this member rejoin its cluster",
					ErrDamaged, path, sc.bad, sc.why, first(sc.committed))
			}
		}
		if log != nil {
			log.Warn("raft: dropping the log's last write, which never completed (torn by a crash, or cut short)", "file", path, "offset", sc.batchStart, "reason", sc.why, "first_index_dropped", first(sc.committed))
		}
		// raft-wal appends over the dropped bytes but leaves what lies
		// beyond its next write; clear them, so that nothing left over is
		// taken for damage at a later start.
		if err := clearFrom(path, sc.batchStart, lastNonZero(buf)+1); err != nil {
			return fmt.Errorf("raft log segment %s: clear the dropped write: %w", path, err)
		}
	}
	return nil
}

// segmentScan is what scanSegment found in one segment file.
type segmentScan struct {
	committed  int    // entry frames covered by a verified commit frame
	batchStart int    // offset where the batch after the last verified commit starts
	bad        int    // offset of the first damage; -1 for none
	why        string // what the damage is
	// garbled reports damage a crash of the process cannot leave: a
	// checksum that does not match, or a frame header that is not zeros
	// and not valid. The other damage is a frame cut off by the end of
	// the file.
	garbled bool
}

// scanSegment reads the frames of a segment file in order and verifies
// each batch's CRC, stopping at the first damage or at the zeros after the
// last frame. Entries after the last commit frame, with no damage, are an
// append that never committed.
func scanSegment(buf []byte) segmentScan {
	sc := segmentScan{batchStart: 0, bad: -1}
	entries := 0
	off := walFileHeaderLen
	damaged := func(at int, format string, args ...any) segmentScan {
		sc.bad, sc.why, sc.garbled = at, fmt.Sprintf(format, args...), true
		return sc
	}
	for off+walFrameHeaderLen <= len(buf) {
		h := buf[off : off+walFrameHeaderLen]
		if h[1] != 0 || h[2] != 0 || h[3] != 0 {
			return damaged(off, "frame header with non-zero reserved bytes")
		}
		switch h[0] {
		case segment.FrameInvalid:
			if !bytes.Equal(h, make([]byte, walFrameHeaderLen)) {
				return damaged(off, "frame header of type 0 with data")
			}
			return sc // the zeros after the last frame
		case segment.FrameEntry, segment.FrameIndex:
			n := int(binary.LittleEndian.Uint32(h[4:8]))
			size := walFrameHeaderLen + n + (walFrameHeaderLen-n%walFrameHeaderLen)%walFrameHeaderLen
			if n > segment.MaxEntrySize {
				return damaged(off, "frame header says %d bytes, more than an entry may have", n)
			}
			if off+size > len(buf) {
				sc = damaged(off, "frame of %d bytes cut off by the end of the file", n)
				sc.garbled = false
				return sc
			}
			if h[0] == segment.FrameEntry {
				entries++
			}
			off += size
		case segment.FrameCommit:
			want := binary.LittleEndian.Uint32(h[4:8])
			if got := crc32.Checksum(buf[sc.batchStart:off], castagnoli); got != want {
				return damaged(sc.batchStart, "the batch ending at byte %d fails its checksum: crc32c %08x, its commit frame says %08x", off, got, want)
			}
			sc.committed = entries
			off += walFrameHeaderLen
			sc.batchStart = off
		default:
			return damaged(off, "frame header of unknown type %d", h[0])
		}
	}
	return sc
}

// intactAfter looks for an intact batch after damage at offset bad in a
// tail segment: a commit frame whose CRC matches the bytes from the end of
// one of the nearest earlier commit frames (or from from, the start of the
// damaged batch). It returns the offset of that commit frame. Each start
// keeps a running CRC, so the work stays linear in the file's size.
func intactAfter(buf []byte, bad, from int) (int, bool) {
	type run struct {
		upto int // the CRC covers buf[start:upto]
		crc  uint32
	}
	runs := []*run{{upto: from}}
	for at := bad - bad%walFrameHeaderLen; at+walFrameHeaderLen <= len(buf); at += walFrameHeaderLen {
		h := buf[at : at+walFrameHeaderLen]
		if h[0] != segment.FrameCommit || h[1] != 0 || h[2] != 0 || h[3] != 0 {
			continue
		}
		want := binary.LittleEndian.Uint32(h[4:8])
		for _, r := range runs {
			if r.upto > at {
				continue
			}
			r.crc = crc32.Update(r.crc, castagnoli, buf[r.upto:at])
			r.upto = at
			if r.crc == want {
				return at, true
			}
		}
		// This may be a commit frame: the next batch would start after it.
		runs = append(runs, &run{upto: at + walFrameHeaderLen})
		if len(runs) > maxTornStarts+1 {
			runs = append(runs[:1], runs[2:]...) // keep from, drop the oldest other
		}
	}
	return 0, false
}

// lastNonZero returns the offset of the last byte of buf that is not 0, or
// -1.
func lastNonZero(buf []byte) int {
	i := len(buf) - 1
	for i >= 0 && buf[i] == 0 {
		i--
	}
	return i
}

// clearFrom overwrites bytes from to end of the file at path with zeros
// and fsyncs it.
func clearFrom(path string, from, end int) error {
	if end <= from {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, end-from), int64(from)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// bootIDFile, in the log's directory, holds the kernel's boot id
// (/proc/sys/kernel/random/boot_id) of the boot in which the log was last
// opened for writing.
const bootIDFile = "boot-id"

// currentBootID returns this boot's id, or "" where the kernel has none.
func currentBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// sameBoot reports whether the log in dir was last opened for writing in
// this boot of the machine: then no write to it can have been torn.
func sameBoot(dir string) bool {
	cur := currentBootID()
	if cur == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, bootIDFile))
	return err == nil && strings.TrimSpace(string(b)) == cur
}

// recordBoot records this boot's id in dir, before the log is written.
func recordBoot(dir string) error {
	cur := currentBootID()
	if cur == "" || sameBoot(dir) {
		return nil
	}
	return durable.WriteFile(filepath.Join(dir, bootIDFile), []byte(cur+"\n"))
}

// checkSegmentHeader checks a segment's file header against the metadata.
func checkSegmentHeader(buf []byte, si types.SegmentInfo) error {
	if len(buf) < walFileHeaderLen {
		return fmt.Errorf("file of %d bytes has no header", len(buf))
	}
	if binary.LittleEndian.Uint32(buf[0:4]) != walMagic || buf[7] != 0 {
		return fmt.Errorf("file header is not a raft-wal v0 header")
	}
	base, id := binary.LittleEndian.Uint64(buf[8:16]), binary.LittleEndian.Uint64(buf[16:24])
	if base != si.BaseIndex || id != si.ID {
		return fmt.Errorf("file header says base index %d, id %d; the log's metadata says %d, %d", base, id, si.BaseIndex, si.ID)
	}
	return nil
}

// segmentFile returns the path of the segment file in dir that holds
// index, or "" when none does. It reads the file names only.
func segmentFile(dir string, index uint64) string {
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return ""
	}
	type seg struct {
		base uint64
		path string
	}
	var segs []seg
	for _, p := range names {
		var base, id uint64
		if _, err := fmt.Sscanf(strings.TrimSuffix(filepath.Base(p), ".wal"), "%020d-%016x", &base, &id); err == nil {
			segs = append(segs, seg{base, p})
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	found := ""
	for _, s := range segs {
		if s.base <= index {
			found = s.path
		}
	}
	return found
}
