package server

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/durable"
)

// reservationFile is the node-local record of the token reservation, in
// the data dir beside raft/.
const reservationFile = "token-reservation"

// reservationHeader starts the file's one line:
// "fenced-token-reservation v1 END CRC" with CRC the CRC-32C (hex) of the
// text before it.
const reservationHeader = "fenced-token-reservation v1"

// tokenReservation is this node's durable token high-water mark
// (docs/design.md §2): the end of the newest token reservation its state
// machine applied. Every token this node's state handed out is at or below
// it, even when the log later loses the entries that issued them, and a
// leader restarts the counter above it. It is written atomically (a
// temporary file, fsync, rename, fsync of the directory) and only ever
// raised.
type tokenReservation struct {
	path string

	mu  sync.Mutex
	end fence.Token // the end on disk
}

// openTokenReservation reads the reservation recorded in dataDir (0 when
// there is none yet). A file that does not read back as written is an
// error: the node must not start without knowing which tokens it may
// have handed out.
func openTokenReservation(dataDir string) (*tokenReservation, error) {
	r := &tokenReservation{path: filepath.Join(dataDir, reservationFile)}
	b, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read token reservation: %w", err)
	}
	end, err := parseReservation(string(b))
	if err != nil {
		return nil, fmt.Errorf("token reservation %s is damaged (%v); refusing to start: without it this node cannot tell which tokens it handed out. If the data dir is otherwise intact, start once with --token-floor above every token clients may hold and remove the file", r.path, err)
	}
	r.end = end
	return r, nil
}

func formatReservation(end fence.Token) string {
	body := fmt.Sprintf("%s %d", reservationHeader, uint64(end))
	return fmt.Sprintf("%s %08x\n", body, crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli)))
}

func parseReservation(s string) (fence.Token, error) {
	line, ok := strings.CutSuffix(s, "\n")
	i := strings.LastIndexByte(line, ' ')
	if !ok || i < 0 {
		return 0, errors.New("not one line ending in a checksum")
	}
	body, sum := line[:i], line[i+1:]
	if sum != fmt.Sprintf("%08x", crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))) {
		return 0, errors.New("checksum mismatch")
	}
	num, ok := strings.CutPrefix(body, reservationHeader+" ")
	if !ok {
		return 0, errors.New("unknown format")
	}
	end, err := strconv.ParseUint(num, 10, 64)
	if err != nil || end > uint64(fence.MaxToken) {
		return 0, fmt.Errorf("end %q is not a token", num)
	}
	return fence.Token(end), nil
}

// load returns the end on disk.
func (r *tokenReservation) load() fence.Token {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// raise makes end durable unless the file already holds as much. It
// returns only once the new file and its directory entry are fsynced.
func (r *tokenReservation) raise(end fence.Token) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if end <= r.end {
		return nil
	}
	if err := durable.WriteFile(r.path, []byte(formatReservation(end))); err != nil {
		return fmt.Errorf("record token reservation %d in %s: %w", uint64(end), r.path, err)
	}
	r.end = end
	return nil
}
