package server

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// Pagination of Status, List and Describe. Every answer is bounded: at
// most maxPageSize items (locks and sessions for Status, waiters for
// Describe; List keeps its own larger limit), each lock in List and
// Status with at most maxInlineWaiters waiters (waiter_count tells how
// many it has; Describe pages through them). A page that is not the last
// carries next_page_token, an opaque cursor naming where the next page
// starts: "l" and a lock name, "s" and a session id, "w" and an offset in
// a lock's queue, base64url-encoded.
const (
	defaultPageSize  = 1000
	maxPageSize      = 1000
	maxInlineWaiters = 100
)

// Cursor kinds.
const (
	cursorLock    = 'l'
	cursorSession = 's'
	cursorWaiter  = 'w'
)

func encodeCursor(kind byte, pos string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{kind}, pos...))
}

// decodeCursor splits a page token into its kind and position; an empty
// token is the first page (kind 0).
func decodeCursor(token string, kinds string) (byte, string, error) {
	if token == "" {
		return 0, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 || !strings.ContainsRune(kinds, rune(b[0])) || len(b) > fence.MaxNameLen+1 {
		return 0, "", fmt.Errorf("%w: page_token %q is not a page token of this call; send the next_page_token of the previous page, or none for the first", fence.ErrInvalidArgument, token)
	}
	return b[0], string(b[1:]), nil
}

// pageSize validates a requested page size, the request's field: 0 is
// def, at most max.
func pageSize(field string, n int32, def, max int) (int, error) {
	switch {
	case n < 0 || int(n) > max:
		return 0, fmt.Errorf("%w: %s %d is out of range; want 0 (default %d) to %d", fence.ErrInvalidArgument, field, n, def, max)
	case n == 0:
		return def, nil
	}
	return int(n), nil
}

// inlineLock is a lock as List and Status show it: at most
// maxInlineWaiters waiters, and their count.
func inlineLock(info fsm.LockInfo) *fencedv1.LockInfo {
	p := lockProto(info)
	p.WaiterCount = uint32(len(info.Waiters))
	if len(p.Waiters) > maxInlineWaiters {
		p.Waiters = p.Waiters[:maxInlineWaiters]
	}
	return p
}

// statusPage fills resp with the page of locks, then sessions, that starts
// at token, at most size items, and sets its next_page_token. With name
// set, the locks are that one lock. Only what visible accepts is shown
// (nil: everything); the rest is counted in hidden_locks and
// hidden_sessions.
func statusPage(fm *fsm.Machine, resp *fencedv1.StatusResponse, name, token string, size int, visible func(string) bool) error {
	kind, pos, err := decodeCursor(token, string([]byte{cursorLock, cursorSession}))
	if err != nil {
		return err
	}
	var after uint64
	if kind != cursorSession {
		var locks []fsm.LockInfo
		var more bool
		var hidden int
		switch {
		case name != "" && kind == 0:
			// The caller may read name (authorize).
			locks = []fsm.LockInfo{fm.Lock(name)}
		case name == "":
			locks, hidden, more = fm.LocksVisible("", pos, visible, size)
		}
		resp.HiddenLocks = uint32(hidden)
		for _, l := range locks {
			resp.Locks = append(resp.Locks, inlineLock(l))
		}
		size -= len(locks)
		if more || size == 0 {
			if n := len(locks); n > 0 {
				resp.NextPageToken = encodeCursor(cursorLock, locks[n-1].Name)
			}
			return nil
		}
	} else if after, err = strconv.ParseUint(pos, 10, 64); err != nil {
		return fmt.Errorf("%w: page_token %q is not a page token of this call", fence.ErrInvalidArgument, token)
	}
	sessions, hidden, more := fm.SessionsVisible(after, visible, size)
	resp.HiddenSessions = uint32(hidden)
	for _, si := range sessions {
		resp.Sessions = append(resp.Sessions, sessionInfoProto(si))
	}
	if more {
		resp.NextPageToken = encodeCursor(cursorSession, strconv.FormatUint(sessions[len(sessions)-1].ID, 10))
	}
	return nil
}

// sessionInfoProto is the API's form of a session.
func sessionInfoProto(si fsm.SessionInfo) *fencedv1.SessionInfo {
	out := &fencedv1.SessionInfo{Session: si.ID, TtlMs: si.TTLMs, Held: si.Held, Waiting: si.Waiting}
	for _, b := range si.Others {
		out.Others = append(out.Others, &fencedv1.SessionBinding{Primitive: b.Primitive, Name: b.Name, Waiting: b.Waiting})
	}
	return out
}
