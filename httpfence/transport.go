package httpfence

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// WithToken returns a context whose requests, sent through a Transport,
// carry token t for object (X-Fencing-Token, X-Resource-Id). An empty
// object sends no X-Resource-Id; the server then derives the object from
// the request (by default its URL path). A later WithToken replaces an
// earlier one; an issuer set by WithIssuer is kept.
//
// It is guard.WithOutgoingToken: the token is not tied to HTTP, and gRPC
// calls made with the context through grpcfence's client interceptors
// carry it too.
func WithToken(ctx context.Context, object string, t fence.Token) context.Context {
	return guard.WithOutgoingToken(ctx, object, t)
}

// WithGrant returns a context whose fenced requests, sent through a
// Transport, carry grant g for object: X-Fencing-Token, X-Fencing-Issuer
// and, when the cluster signed it, X-Fencing-Grant (g.Signed), which a
// resource behind guard.Signed requires. It is guard.WithOutgoingGrant.
func WithGrant(ctx context.Context, object string, g fence.Grant) context.Context {
	return guard.WithOutgoingGrant(ctx, object, g)
}

// WithIssuer returns a context whose fenced requests, sent through a
// Transport, also carry X-Fencing-Issuer: the issuer (cluster id, the
// Issuer of a fence.Grant) of the token, for resources pinned to one
// issuer. It is guard.WithOutgoingIssuer.
func WithIssuer(ctx context.Context, issuer string) context.Context {
	return guard.WithOutgoingIssuer(ctx, issuer)
}

// maxErrorBody bounds how much of a rejection's body the Transport reads.
const maxErrorBody = 64 << 10

// Transport is the client side of the HTTP fencing convention, an
// http.RoundTripper. It adds the token, object and issuer of the request's
// context (WithToken, WithIssuer, guard.WithOutgoingGrant) as headers, replacing any already set;
// a request whose context has no token is sent unchanged. Its zero value
// sends through http.DefaultTransport.
//
// Unlike a plain RoundTripper it turns fencing rejections into errors, so
// callers check them with errors.Is and errors.As instead of parsing
// responses. http.Client returns them wrapped in a *url.Error. The
// response's body is read and closed; the response itself is not returned.
//
//   - 409 with X-Required-Token (or X-Fencing-Error: stale-token): a
//     *fence.StaleTokenError with the object, the presented and the
//     required token (from X-Required-Token and the JSON body);
//   - 400 with X-Fencing-Error: invalid-token: an error matching
//     fence.ErrInvalidToken, carrying the server's message;
//   - 400 with X-Fencing-Error: invalid-resource: an error matching
//     fence.ErrInvalidArgument;
//   - 403 with X-Fencing-Error: issuer-mismatch: an error matching
//     fence.ErrIssuerMismatch;
//   - 403 with X-Fencing-Error: invalid-grant: an error matching
//     fence.ErrInvalidGrant (a resource behind guard.Signed).
//
// Every other response, including a 400 or 403 without X-Fencing-Error
// (the handler's own validation, or a server that does not send the
// marker), is returned as is. Requests are not retried: a stale token
// stays stale.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if o, ok := guard.OutgoingFromContext(req.Context()); ok {
		req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
		req.Header.Set(HeaderToken, o.Token.String())
		if o.Object != "" {
			req.Header.Set(HeaderResourceID, o.Object)
		}
		if o.Issuer != "" {
			req.Header.Set(HeaderIssuer, o.Issuer)
		}
		if o.Grant != "" {
			req.Header.Set(HeaderGrant, o.Grant)
		}
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if rerr := rejection(req, resp); rerr != nil {
		return nil, rerr
	}
	return resp, nil
}

// rejection returns the error for a fencing rejection, reading and closing
// its body, or nil for any other response (left untouched).
func rejection(req *http.Request, resp *http.Response) error {
	reason := resp.Header.Get(HeaderError)
	required := resp.Header.Get(HeaderRequiredToken)
	switch {
	case resp.StatusCode == http.StatusConflict && (required != "" || reason == ReasonStaleToken):
	case resp.StatusCode == http.StatusBadRequest && (reason == ReasonInvalidToken || reason == ReasonInvalidResource):
	case resp.StatusCode == http.StatusForbidden && (reason == ReasonIssuerMismatch || reason == ReasonInvalidGrant):
	default:
		return nil
	}
	var body errorBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if json.Unmarshal(raw, &body) != nil || body.Error == "" {
		body.Error = string(raw)
	}
	re := &rejectionError{status: resp.StatusCode, msg: body.Error}
	switch resp.StatusCode {
	case http.StatusBadRequest:
		re.kind = fence.ErrInvalidToken
		if reason == ReasonInvalidResource {
			re.kind = fence.ErrInvalidArgument
		}
		return re
	case http.StatusForbidden:
		re.kind = fence.ErrIssuerMismatch
		if reason == ReasonInvalidGrant {
			re.kind = fence.ErrInvalidGrant
		}
		return re
	}
	// A stale token.
	se := &fence.StaleTokenError{Object: resp.Header.Get(HeaderResourceID)}
	if se.Object == "" {
		se.Object = req.Header.Get(HeaderResourceID)
	}
	if se.Object == "" {
		se.Object = req.URL.Path
	}
	if r, err := fence.ParseToken(required); err == nil {
		se.Required = r
	} else if r, err := fence.ParseToken(body.Required); err == nil {
		se.Required = r
	} else {
		re.kind = fence.ErrStaleToken
		re.msg += fmt.Sprintf(" (no valid %s in the response)", HeaderRequiredToken)
		return re
	}
	if p, err := fence.ParseToken(body.Presented); err == nil {
		se.Presented = p
	} else if p, err := fence.ParseToken(req.Header.Get(HeaderToken)); err == nil {
		se.Presented = p
	}
	return se
}

// rejectionError is a fencing rejection other than a stale token with its
// watermark: it carries the server's message and matches kind.
type rejectionError struct {
	status int
	msg    string
	kind   error
}

func (e *rejectionError) Error() string {
	return fmt.Sprintf("httpfence: server refused the request (%d %s): %s", e.status, http.StatusText(e.status), e.msg)
}

func (e *rejectionError) Unwrap() error { return e.kind }
