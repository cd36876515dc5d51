package guard

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
)

// Fields names the fencing fields of a request in one transport: the HTTP
// headers (X-Fencing-Token, X-Resource-Id, X-Fencing-Issuer,
// X-Fencing-Grant) or the gRPC metadata keys, and the words for them in
// messages: Kind for one ("header", "metadata"), Plural for several
// ("headers", "values").
type Fields struct {
	Token, Object, Issuer, Grant string
	Kind, Plural                 string
}

// Presented is what a fenced request presents: its token, the object it
// names ("" when it names none), the issuer of its token ("" when not
// sent) and its signed grant ("" when not sent; Signed verifies it).
type Presented struct {
	Token  fence.Token
	Object string
	Issuer string
	Grant  string
}

// ParsePresented reads a request's fencing fields through values, which
// returns every value sent for a field (http.Header.Values,
// metadata.MD.Get). what describes the request in the message for a
// missing token ("a PUT here", "a call of /pkg.Service/Method"). Each
// field must be sent at most once: a request that repeats one is refused
// rather than letting the first (or the last) win, since a proxy, the
// guard and the handler might each pick a different one. It checks the
// token, then the object, then the issuer, and returns the first error:
//
//   - a token missing, malformed, 0, above fence.MaxToken or repeated, or
//     an issuer repeated (the token's origin is then unclear): an error
//     matching fence.ErrInvalidToken;
//   - an object repeated: an error matching fence.ErrInvalidArgument;
//   - a signed grant repeated: an error matching fence.ErrInvalidGrant.
//
// A missing object, issuer or grant is not an error here: the transport
// derives the object otherwise, CheckIssuer decides about the issuer and
// Signed about the grant.
func ParsePresented(values func(field string) []string, f Fields, what string) (Presented, error) {
	var p Presented
	raw, err := SingleValue(values(f.Token), f.Token, f.Plural, fence.ErrInvalidToken)
	switch {
	case err != nil:
		return p, err
	case raw == "" && len(values(f.Token)) == 0:
		return p, fmt.Errorf("%w: missing %s %s; %s needs the fencing token of your grant, a decimal number from 1 to %d",
			fence.ErrInvalidToken, f.Token, f.Kind, what, uint64(fence.MaxToken))
	}
	if p.Token, err = fence.ParseToken(raw); err != nil {
		return p, fmt.Errorf("%s: %w", f.Token, err)
	}
	if p.Object, err = SingleValue(values(f.Object), f.Object, f.Plural, fence.ErrInvalidArgument); err != nil {
		return p, fmt.Errorf("%w, naming the object the write is for", err)
	}
	if p.Issuer, err = SingleValue(values(f.Issuer), f.Issuer, f.Plural, fence.ErrInvalidToken); err != nil {
		return p, err
	}
	if f.Grant != "" {
		if p.Grant, err = SingleValue(values(f.Grant), f.Grant, f.Plural, fence.ErrInvalidGrant); err != nil {
			return p, err
		}
	}
	return p, nil
}

// SingleValue returns the one value sent for field name, "" when none was
// sent, or, when it was sent more than once, an error wrapping kind that
// names the field and the count ("2 X-Fencing-Token headers; send one",
// with plural "headers"). Servers use it for every request field whose
// meaning a second copy could change.
func SingleValue(vs []string, name, plural string, kind error) (string, error) {
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", fmt.Errorf("%w: %d %s %s; send one", kind, len(vs), name, plural)
}
