package client

import (
	"net/http"
)

// headerLeader is the response header in which a follower that forwarded a
// call names the leader's API address (server.HeaderLeader).
const headerLeader = "Fenced-Leader"

// WithFollowLeader sets whether the Client moves its calls to the leader
// when a follower that forwarded one names it, which saves the follower the
// work of forwarding every call. On by default.
//
// The Client only ever moves to one of the endpoints it was given, the one
// whose host:port is exactly the address the follower named; an address
// that matches none is ignored, so a member cannot send the Client to a
// server it was not configured to trust. New calls and reopened streams go
// to the leader; a stream open on the follower keeps running through it.
// Failover when an endpoint fails is the same either way.
func WithFollowLeader(on bool) Option {
	return func(o *options) { o.noFollowLeader = !on }
}

// leaderTransport reads the leader a forwarding follower named on each
// response and moves the Client's calls there.
type leaderTransport struct {
	base http.RoundTripper
	c    *Client
}

func (t leaderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(r)
	if err == nil {
		if leader := res.Header.Get(headerLeader); leader != "" {
			t.c.followLeader(r.URL.Host, leader)
		}
	}
	return res, err
}

// followingLeader wraps hc so that the Client follows the leader named in
// its responses, unless WithFollowLeader(false) turned that off.
func (c *Client) followingLeader(hc *http.Client) *http.Client {
	if !c.followLeaderOn {
		return hc
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *hc
	out.Transport = leaderTransport{base: base, c: c}
	return &out
}

// followLeader moves calls to the configured endpoint whose host is leader,
// when the call answered from host went to the endpoint calls go to now
// (a call that failed over in the meantime has moved them already). A
// leader that is none of the endpoints changes nothing.
func (c *Client) followLeader(host, leader string) {
	if host == leader {
		return
	}
	i, ep := c.endpoint()
	if ep.host != host {
		return
	}
	for j, e := range c.endpoints {
		if e.host != leader {
			continue
		}
		if c.cur.CompareAndSwap(i, int64(j)) {
			c.log.Info("fenced: following the leader", "from", ep.addr, "to", e.addr)
		}
		return
	}
}
