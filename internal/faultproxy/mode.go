package faultproxy

import (
	"fmt"
	"time"
)

// Mode is the state of a Proxy's link. The zero value is Pass.
type Mode int

// The modes of a link; see the package documentation for what each models.
const (
	// Pass forwards bytes in both directions, subject to SetDelay and
	// SetOneWay.
	Pass Mode = iota
	// Blackhole keeps connections open and accepts new ones but discards
	// every byte in both directions, so peers stall until their deadlines.
	Blackhole
	// Reject resets open connections and resets new ones as soon as they are
	// accepted, so peers fail fast.
	Reject
)

// String returns the name of the mode, such as "blackhole".
func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Blackhole:
		return "blackhole"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Direction is one direction of a proxied connection.
type Direction int

// The two directions of a connection.
const (
	// ClientToServer carries bytes from the peer that dialed the proxy to the
	// target.
	ClientToServer Direction = iota
	// ServerToClient carries bytes from the target back to the peer that
	// dialed the proxy.
	ServerToClient
)

// String returns the name of the direction, such as "client->server".
func (d Direction) String() string {
	switch d {
	case ClientToServer:
		return "client->server"
	case ServerToClient:
		return "server->client"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// SetMode switches the link to m. It is safe to call while traffic flows.
//
// Switching to Reject resets every open connection. Switching from Blackhole
// to Pass resets every open connection too, unless SetOneWay still blocks
// both directions: those connections lost bytes and cannot be resumed. New
// connections accepted after SetMode returns see the new mode.
//
// SetMode panics if m is not one of Pass, Blackhole or Reject.
func (p *Proxy) SetMode(m Mode) {
	if m < Pass || m > Reject {
		panic("faultproxy: invalid " + m.String())
	}
	p.update(func() { p.mode = m })
}

// SetOneWay blocks (blocked true) or unblocks one direction of the link. A
// blocked direction discards what it reads, as Blackhole does for both
// directions; on connections already open, the other direction keeps
// forwarding while the mode is Pass. Connections accepted while a direction
// is blocked are held open but never reach the target, since their TCP
// handshake could not have completed. It is safe to call while traffic flows.
//
// Unblocking a direction that was blocked, while the mode is Pass, resets
// every open connection, as SetMode does when leaving Blackhole.
//
// SetOneWay panics if dir is not ClientToServer or ServerToClient.
func (p *Proxy) SetOneWay(dir Direction, blocked bool) {
	if dir != ClientToServer && dir != ServerToClient {
		panic("faultproxy: invalid " + dir.String())
	}
	p.update(func() { p.oneWay[dir] = blocked })
}

// SetDelay adds d of latency to every chunk forwarded, in each direction:
// a chunk read from one side is written to the other d later. Chunks of one
// direction are forwarded in order, one at a time, so a delay also lowers
// throughput. A zero or negative d removes the delay. It applies to chunks
// read after SetDelay returns.
func (p *Proxy) SetDelay(d time.Duration) {
	p.delay.Store(int64(max(d, 0)))
}

// update applies f to the link state under p.mu and resets every open
// connection if the new state rejects connections or unblocks a direction
// that was blocked.
func (p *Proxy) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	before := [2]bool{p.blockedLocked(ClientToServer), p.blockedLocked(ServerToClient)}
	f()
	reset := p.mode == Reject
	for dir, was := range before {
		if was && !p.blockedLocked(Direction(dir)) {
			reset = true
		}
	}
	if reset {
		for l := range p.links {
			l.resetLocked()
		}
	}
}

// blocked reports whether bytes in direction dir are discarded.
func (p *Proxy) blocked(dir Direction) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blockedLocked(dir)
}

func (p *Proxy) blockedLocked(dir Direction) bool {
	return p.mode != Pass || p.oneWay[dir]
}
