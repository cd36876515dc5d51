// Package faultproxy provides a TCP proxy on loopback whose link can be cut,
// slowed down or made one-way, so that tests can put a fault between a client
// and a server, or between two Raft peers, over real TCP.
//
// A Proxy listens on a loopback address and forwards every connection it
// accepts to a target address:
//
//	p, err := faultproxy.New(serverAddr) // listens on 127.0.0.1:0
//	if err != nil { ... }
//	defer p.Close()
//	conn, err := net.Dial("tcp", p.Addr())
//
// The link is in one of three modes, changed at any time with SetMode while
// traffic flows:
//
//   - Pass forwards bytes in both directions.
//   - Blackhole models a partition in which packets are dropped. Connections
//     stay open and new ones are accepted, but bytes read from either side
//     are discarded, so a peer's writes succeed and its reads stall until its
//     own deadline runs out. A client with a deadline times out; it does not
//     get a connection error.
//   - Reject models a peer that is down. Open connections are reset (RST)
//     and new ones are reset as soon as they are accepted, so dials or the
//     first read fail fast.
//
// SetOneWay blocks a single direction the same way Blackhole blocks both,
// and SetDelay adds latency to every chunk in each direction.
//
// Bytes are never buffered beyond one read buffer per direction of a
// connection: a blocked direction discards what it reads, it does not hold it
// back for later. A connection that may have lost bytes in the middle of a
// stream cannot be resumed, so whenever a direction that was blocked is
// unblocked (SetMode(Pass) after Blackhole, SetOneWay(dir, false)), every
// open connection is reset; new connections work normally. This is what a
// real partition looks like once it heals: the old TCP connections are dead
// and the peers reconnect.
//
// A connection accepted while any direction is blocked is never connected to
// the target, since its TCP handshake could not have completed across the
// partition; it is held open, silent, until it is reset.
//
// Close closes the listener and every connection and waits for all the
// goroutines the Proxy started, so a test that closes its proxies leaks none.
//
// The package is meant for tests: it listens on loopback addresses only.
package faultproxy
