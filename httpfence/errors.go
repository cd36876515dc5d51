package httpfence

import (
	"encoding/json"
	"net/http"

	"github.com/fenced-dev/fenced/internal/wire"
)

// Headers of the HTTP fencing convention (docs/design.md §5). HeaderIssuer and
// HeaderError are this package's extensions; a server or client that does
// not know them still follows the convention.
const (
	// HeaderToken carries the writer's fencing token, in decimal.
	HeaderToken = "X-Fencing-Token"
	// HeaderResourceID names the protected object the write is for. On a
	// rejection the middleware echoes the object it checked.
	HeaderResourceID = "X-Resource-Id"
	// HeaderIssuer carries the issuer (cluster id) of the token, for
	// resources pinned to one issuer.
	HeaderIssuer = "X-Fencing-Issuer"
	// HeaderGrant carries the signed grant of the token (fence.Grant's
	// Signed), for resources behind guard.Signed; optional elsewhere.
	HeaderGrant = "X-Fencing-Grant"
	// HeaderRequiredToken carries, on a 409, the lowest token the object
	// accepts now (its watermark).
	HeaderRequiredToken = "X-Required-Token"
	// HeaderError marks a response as a fencing rejection and says which:
	// one of the Reason constants. The Transport maps only marked 400 and
	// 403 responses to errors, so a handler's own 400 (a malformed body,
	// say) is never mistaken for a token problem.
	HeaderError = "X-Fencing-Error"
)

// Reasons sent in HeaderError.
const (
	// ReasonInvalidToken: the token is missing or malformed, 0 or above
	// fence.MaxToken, or it or X-Fencing-Issuer was sent twice (status
	// 400).
	ReasonInvalidToken = "invalid-token"
	// ReasonInvalidResource: no object could be determined for the request,
	// or X-Resource-Id was sent twice (status 400).
	ReasonInvalidResource = "invalid-resource"
	// ReasonStaleToken: the token is below the object's watermark (status
	// 409).
	ReasonStaleToken = "stale-token"
	// ReasonIssuerMismatch: the token comes from another issuer than the
	// one the resource is pinned to, or none was presented (status 403).
	ReasonIssuerMismatch = "issuer-mismatch"
	// ReasonInvalidGrant: the resource requires a signed grant
	// (guard.Signed) and the one presented is missing, sent twice, does not
	// verify, or is for another token, issuer or scope (status 403).
	ReasonInvalidGrant = "invalid-grant"
)

// errorBody is the JSON body of every rejection. Tokens are decimal strings
// (docs/design.md §2) so JavaScript clients never lose precision.
type errorBody struct {
	Error     string `json:"error"`
	Presented string `json:"presented,omitempty"`
	Required  string `json:"required,omitempty"`
}

// WriteError writes the response for a fencing error and reports whether
// err was one. For any other error (including nil) it writes nothing and
// returns false, leaving the response to the caller:
//
//   - a *fence.StaleTokenError (or any error matching fence.ErrStaleToken):
//     409 Conflict, header X-Required-Token with the watermark, body
//     {"error","presented","required"};
//   - an error matching fence.ErrInvalidToken: 400 Bad Request, body
//     {"error"};
//   - an error matching fence.ErrInvalidGrant (guard.Signed) or
//     fence.ErrIssuerMismatch: 403 Forbidden, body {"error"}. 403 rather than 409 because retrying cannot help: the
//     token comes from another cluster, and a 409 would read as stale to
//     clients that know only docs/design.md §5.
//
// Each response also carries X-Fencing-Error with the Reason and, for a
// stale token, X-Resource-Id with the object. Handlers call it with the
// error of guard.Do or of their own guard, and so do servers that check
// tokens without the middleware (the fenced server's own kv API), so the
// convention is written in one place:
//
//	if err := guard.Do(r.Context(), write); err != nil {
//		if !httpfence.WriteError(w, err) {
//			http.Error(w, "internal error", http.StatusInternalServerError)
//		}
//		return
//	}
func WriteError(w http.ResponseWriter, err error) bool {
	r, ok := wire.Encode(err)
	status, fencing := statusOf[r.Reason]
	if !ok || !fencing {
		return false
	}
	body := errorBody{Error: err.Error()}
	if req, ok := r.Fields[wire.FieldRequired]; ok {
		if obj := r.Fields[wire.FieldObject]; obj != "" {
			w.Header().Set(HeaderResourceID, obj)
		}
		w.Header().Set(HeaderRequiredToken, req)
		body.Presented, body.Required = r.Fields[wire.FieldPresented], req
	}
	writeRejection(w, status, r.Reason, body)
	return true
}

// statusOf is the HTTP status of each rejection of the convention, by
// reason (package wire decides which fence error has which reason).
var statusOf = map[string]int{
	ReasonStaleToken:     http.StatusConflict,
	ReasonInvalidToken:   http.StatusBadRequest,
	ReasonIssuerMismatch: http.StatusForbidden,
	ReasonInvalidGrant:   http.StatusForbidden,
}

func writeRejection(w http.ResponseWriter, status int, reason string, body errorBody) {
	w.Header().Set(HeaderError, reason)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, body errorBody) {
	b, _ := json.Marshal(body) // a struct of strings always marshals
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
