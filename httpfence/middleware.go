package httpfence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Config configures the middleware. Its zero value is valid: InHandler
// mode without a Guard (handlers use their own guard via guard.TokenFrom),
// writes fenced, GET, HEAD and OPTIONS not, the object taken from
// X-Resource-Id or else the URL path.
type Config struct {
	// Guard checks tokens and raises watermarks atomically with the write:
	// any fence.Guard, for example a *postgres.Guard, *sqlfence.Guard,
	// *redisfence.Guard, *filefence.Dir or *guard.Memory. Required in
	// AroundHandler mode and for guard.Do; nil is allowed in InHandler mode
	// when handlers use their own guard.
	Guard fence.Guard
	// Mode is guard.InHandler (the default) or guard.AroundHandler. In
	// AroundHandler mode a handler succeeds when it answers 2xx; its
	// response is buffered until the guard's step is over (no streaming,
	// no http.Flusher), so a step that fails after the handler never sends
	// its 2xx.
	Mode guard.Mode
	// Fenced reports whether a request must carry a token. Unfenced
	// requests pass through untouched. Nil means DefaultFenced: every
	// method except GET, HEAD and OPTIONS.
	Fenced func(r *http.Request) bool
	// Resolve returns the object of a request without an X-Resource-Id
	// header; "" rejects the request with 400. Nil means the URL path.
	//
	// X-Resource-Id, when present, wins. Fencing protects against delayed
	// holders, not against clients that lie: a client can name any object.
	// A handler that knows which object it writes may compare it with
	// guard.TokenFrom's.
	Resolve func(r *http.Request) string
	// Issuer pins the resource to one issuer (cluster id): when not empty,
	// a request whose X-Fencing-Issuer differs or is missing is rejected
	// with 403 (guard.CheckIssuer). Empty accepts every issuer.
	Issuer string
	// Logger receives errors of the Guard that are not fencing rejections
	// (the client gets a 500). Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a Config that New would refuse: an unknown Mode, or
// AroundHandler without a Guard (guard.Mode.Validate).
func (c Config) Validate() error {
	return c.Mode.Validate(c.Guard)
}

// DefaultFenced reports whether r is fenced by default: every method except
// GET, HEAD and OPTIONS, which must not change state.
func DefaultFenced(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// Middleware is the server side of the HTTP fencing convention. Create it
// with New and wrap handlers with Handler.
type Middleware struct {
	cfg Config
}

// New returns a middleware configured by cfg, or the error of
// cfg.Validate.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Fenced == nil {
		cfg.Fenced = DefaultFenced
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(r *http.Request) string { return r.URL.Path }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Middleware{cfg: cfg}, nil
}

// Handler returns next behind the middleware. For a fenced request it
// answers 400 for a missing or malformed token or object, 403 for an
// issuer the resource is not pinned to, and, in AroundHandler mode (or when
// the handler hands guard.Do's error to WriteError), 409 for a stale token; see
// WriteError for the bodies. Otherwise it calls next with a context that
// carries the object and token (guard.TokenFrom, guard.Do) and the
// presented issuer (guard.IssuerFromContext); in AroundHandler mode it
// calls next inside guard.Do.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.cfg.Fenced(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := ParseHeaders(r)
		if err == nil && p.Object == "" {
			p.Object, err = m.object(r)
		}
		if errors.Is(err, fence.ErrInvalidArgument) {
			writeRejection(w, http.StatusBadRequest, ReasonInvalidResource, errorBody{Error: err.Error()})
			return
		}
		if err != nil {
			WriteError(w, err)
			return
		}
		ctx := r.Context()
		if p.Issuer != "" {
			ctx = guard.ContextWithIssuer(ctx, p.Issuer)
		}
		if p.Grant != "" {
			ctx = guard.ContextWithGrant(ctx, p.Grant)
		}
		if err := guard.CheckIssuer(ctx, m.cfg.Issuer); err != nil {
			WriteError(w, err)
			return
		}
		object, t := p.Object, p.Token
		r = r.WithContext(guard.WithFence(ctx, object, t, m.cfg.Guard))
		if m.cfg.Mode == guard.InHandler {
			next.ServeHTTP(w, r)
			return
		}
		m.around(w, r, object, t, next)
	})
}

// object returns the object of a request without X-Resource-Id:
// Config.Resolve's.
func (m *Middleware) object(r *http.Request) (string, error) {
	if o := m.cfg.Resolve(r); o != "" {
		return o, nil
	}
	return "", fmt.Errorf("%w: no %s header and no object could be derived from the request; send %s naming the object the write is for", fence.ErrInvalidArgument, HeaderResourceID, HeaderResourceID)
}

// headerFields are the fencing headers, for guard.ParsePresented.
var headerFields = guard.Fields{Token: HeaderToken, Object: HeaderResourceID, Issuer: HeaderIssuer, Grant: HeaderGrant, Kind: "header", Plural: "headers"}

// ParseHeaders parses the fencing headers of a request: X-Fencing-Token
// (required), X-Resource-Id and X-Fencing-Issuer ("" when absent), each
// at most once (guard.ParsePresented). A missing, malformed or repeated
// token, or a repeated issuer, is an error matching fence.ErrInvalidToken
// (WriteError answers 400 invalid-token); a repeated X-Resource-Id is an
// error matching fence.ErrInvalidArgument (the middleware answers 400
// invalid-resource). Servers that check tokens without the middleware use
// it too, so a request is read the same way everywhere.
func ParseHeaders(r *http.Request) (guard.Presented, error) {
	return guard.ParsePresented(r.Header.Values, headerFields, "a "+r.Method+" here")
}

// errNotSuccess makes the Guard leave the watermark unchanged when the
// handler answered other than 2xx.
var errNotSuccess = errors.New("httpfence: handler did not succeed")

// around runs next inside the Guard's atomic step (AroundHandler).
func (m *Middleware) around(w http.ResponseWriter, r *http.Request, object string, t fence.Token, next http.Handler) {
	var buf *bufferedResponse
	err := guard.Do(r.Context(), func(ctx context.Context) error {
		buf = &bufferedResponse{header: make(http.Header)}
		next.ServeHTTP(buf, r.WithContext(ctx))
		if !buf.success() {
			return errNotSuccess
		}
		return nil
	})
	switch {
	case buf != nil && (err == nil || errors.Is(err, errNotSuccess)):
		buf.writeTo(w)
	case err == nil:
		m.cfg.Logger.ErrorContext(r.Context(), "httpfence: guard accepted the token without calling apply", "object", object, "token", t)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "httpfence: the fencing guard did not run the handler"})
	case WriteError(w, err):
	default:
		m.cfg.Logger.ErrorContext(r.Context(), "httpfence: guard failed", "object", object, "token", t, "handler_ran", buf != nil, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "httpfence: the fencing guard failed; the write was not applied or its outcome is unknown"})
	}
}

// bufferedResponse holds a handler's response until the atomic step is
// over, so a step that fails after the handler never sends its 2xx.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status != 0 || (code >= 100 && code <= 199) {
		return // informational responses are not buffered
	}
	b.status = code
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *bufferedResponse) success() bool {
	return b.status == 0 || (b.status >= 200 && b.status <= 299)
}

func (b *bufferedResponse) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}
