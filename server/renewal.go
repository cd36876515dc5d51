package server

import fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"

// renewal is one session's renewal taken out of a KeepAlive message: what
// Server.renew needs of it. A stream's renewals wait in a slice of these
// for their turn, 32 bytes and the secret each, rather than as the
// decoded messages (96 bytes and the secret, and a pointer): a million
// sessions' renewals queued behind a busy leader were about 185 MB of
// its heap in a profile at a million holders (docs/benchmarks.md).
type renewal struct {
	session, nonce uint64
	secret         string
}

// renewalOf returns m's renewal, without the ones in its "more".
func renewalOf(m *fencedv1.KeepAliveRequest) renewal {
	return renewal{session: m.Session, nonce: m.Nonce, secret: m.Secret}
}

// queueRenewals appends the renewals of m (its own, then its "more") to q.
func queueRenewals(q []renewal, m *fencedv1.KeepAliveRequest) []renewal {
	q = append(q, renewalOf(m))
	for _, r := range m.More {
		q = append(q, renewalOf(r))
	}
	return q
}
