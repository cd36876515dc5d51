package client

import "net/http"

// WithBearerToken makes the Client send "Authorization: Bearer token" on
// every call, streams (KeepAlive, Pipeline) included, for a server started
// with an auth file (fenced serve --auth-file). The token is a secret: it
// is sent on every request, so use it over TLS (WithTLS) anywhere but
// loopback.
func WithBearerToken(token string) Option {
	return func(o *options) { o.token = token }
}

// bearerTransport adds the Authorization header to every request.
type bearerTransport struct {
	base  http.RoundTripper
	value string
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", t.value)
	return t.base.RoundTrip(r)
}

// authorized returns hc, or, with a bearer token, a client that sends the
// token through hc's transport.
func (c *Client) authorized(hc *http.Client) *http.Client {
	if c.token == "" {
		return hc
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *hc
	out.Transport = bearerTransport{base: base, value: "Bearer " + c.token}
	return &out
}
