package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	"github.com/fenced-dev/fenced/guard"
	"github.com/fenced-dev/fenced/httpfence"
	"github.com/fenced-dev/fenced/internal/wire"
)

// kvHTTP serves the fenced kv as PUT/GET/DELETE /v1/kv/{key} with the HTTP
// fencing convention of docs/design.md §5: X-Fencing-Token on writes; missing,
// invalid or sent twice → 400 with a JSON error (as is any fencing header,
// If-Match or Idempotency-Key sent twice); stale → 409 with X-Required-Token and
// {"error","presented","required"}; a token of another cluster
// (X-Fencing-Issuer) → 403; a token that is not a live grant's for the
// key's scope → 403 with X-Fencing-Error: scope-mismatch, X-Token-Kind,
// X-Token-Scope and X-Required-Scope. httpfence.WriteError writes these rejections,
// X-Fencing-Error included, so httpfence.Transport maps them to fence
// errors. If-Match makes a write conditional on the key's version (the ETag
// of GET); a mismatch is 412 with the current version.
func (s *Server) kvHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := fence.ValidateName(key); err != nil {
		writeJSONError(w, http.StatusBadRequest, fmt.Errorf("key: %w", err), nil)
		return
	}
	n := need{perm: permKVWrite, name: key}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		n.perm = permRead
	}
	if err := s.authorize(r.Context(), r.Method+" /v1/kv/", n); err != nil {
		writeJSONError(w, http.StatusForbidden, err, nil)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		e := s.kvGet(key)
		if e.Token != 0 {
			w.Header().Set(headerToken, e.Token.String())
		}
		if !e.Exists {
			writeJSONError(w, http.StatusNotFound, fmt.Errorf("key %q not found", key), nil)
			return
		}
		w.Header().Set("ETag", etag(e.Version))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(e.Value)))
		if r.Method == http.MethodGet {
			w.Write(e.Value)
		}
	case http.MethodPut, http.MethodDelete:
		s.kvHTTPWrite(w, r, key)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		writeJSONError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s not allowed; use GET, HEAD, PUT or DELETE", r.Method), nil)
	}
}

func (s *Server) kvHTTPWrite(w http.ResponseWriter, r *http.Request, key string) {
	req := kvWriteRequest{key: key, delete: r.Method == http.MethodDelete}
	p, err := httpfence.ParseHeaders(r)
	if err != nil {
		// A missing, malformed or repeated token or issuer: 400 with
		// X-Fencing-Error: invalid-token. A repeated X-Resource-Id: 400.
		if !httpfence.WriteError(w, err) {
			writeJSONError(w, http.StatusBadRequest, err, nil)
		}
		return
	}
	req.token, req.issuer = p.Token, p.Issuer
	im, err := guard.SingleValue(r.Header.Values("If-Match"), "If-Match", "headers", fence.ErrInvalidArgument)
	if err == nil {
		req.requestID, err = guard.SingleValue(r.Header.Values("Idempotency-Key"), "Idempotency-Key", "headers", fence.ErrInvalidArgument)
	}
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err, nil)
		return
	}
	if im != "" {
		v, err := strconv.ParseUint(strings.Trim(im, `"`), 10, 64)
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("%w: If-Match %q is not a version; send the ETag of a GET (\"0\" for a key that must not exist)", fence.ErrInvalidArgument, im), nil)
			return
		}
		req.ifVersion = &v
	}
	if !req.delete {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fsm.MaxValueBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: value larger than %d bytes (1 MiB)", fence.ErrInvalidArgument, fsm.MaxValueBytes), nil)
			return
		}
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("read body: %w", err), nil)
			return
		}
		req.value = body
	}
	res, err := s.kvWrite(r.Context(), req)
	var vm *fence.VersionMismatchError
	var sm *fence.ScopeMismatchError
	switch {
	case errors.As(err, &sm):
		// 403: the token is not a live grant's for the key's scope;
		// X-Token-Kind and X-Token-Scope name the grant it belongs to
		// (absent: none), X-Required-Scope the scope the write needs.
		if rej, ok := wire.Encode(err); ok {
			rej.SetHeader(w.Header())
		}
		writeJSONError(w, http.StatusForbidden, err, map[string]any{"kind": string(sm.Kind), "scope": sm.Scope, "required_scope": sm.Required})
	case err == nil:
		w.Header().Set(headerToken, res.Token.String())
		if !req.delete {
			w.Header().Set("ETag", etag(res.Version))
		}
		writeJSON(w, http.StatusOK, map[string]any{"version": strconv.FormatUint(res.Version, 10), "token": res.Token.String(), "deleted": res.Deleted})
	case httpfence.WriteError(w, err):
		// 409 for a stale token (X-Required-Token, X-Resource-Id: the key),
		// 400 for an invalid or never issued token, 403 for another issuer.
	case errors.As(err, &vm):
		w.Header().Set(headerCurrentVersion, strconv.FormatInt(vm.Current, 10))
		writeJSONError(w, http.StatusPreconditionFailed, err, map[string]any{"version": strconv.FormatInt(vm.Current, 10)})
	case errors.Is(err, fence.ErrInvalidArgument):
		writeJSONError(w, http.StatusBadRequest, err, nil)
	case errors.Is(err, fence.ErrLimitExceeded):
		// The kv is at --max-kv-keys or --max-kv-bytes: retrying will not help.
		writeJSONError(w, http.StatusInsufficientStorage, err, nil)
	default:
		writeJSONError(w, http.StatusServiceUnavailable, err, nil)
	}
}

// kvPathPrefix is the path of the kv over HTTP, before the key.
const kvPathPrefix = "/v1/kv/"

// kvCanonicalPath answers 400 for a /v1/kv/ path that is not in canonical
// form (a ".", ".." or empty segment), which the mux would otherwise
// redirect to its cleaned form: to another key ("a/../b" to "b"), with the
// write's token, for a client that follows redirects. Such keys are valid
// names; the Connect API (KVService) reaches them.
func kvCanonicalPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, kvPathPrefix) {
			clean := path.Clean(p)
			if strings.HasSuffix(p, "/") && clean != "/" {
				clean += "/"
			}
			if clean != p {
				writeJSONError(w, http.StatusBadRequest, fmt.Errorf("%w: key %q cannot be sent in a URL path: it has a \".\", \"..\" or empty segment, which HTTP paths do not keep; use KVService over the API for it",
					fence.ErrInvalidArgument, strings.TrimPrefix(p, kvPathPrefix)), nil)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func etag(version uint64) string { return `"` + strconv.FormatUint(version, 10) + `"` }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeJSONError writes {"error": err, ...extra}.
func writeJSONError(w http.ResponseWriter, status int, err error, extra map[string]any) {
	body := map[string]any{"error": err.Error()}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, status, body)
}
