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

// Mode says where the atomic step of check, write and raise happens.
type Mode int

const (
	// InHandler, the default: the middleware validates the request's
	// token, object and issuer, rejects what is malformed, and passes the
	// handler a context carrying them. The handler makes its write through
	// Do (the Store's atomic step) or through its own guard with the token
	// of TokenFrom. A handler that writes without either is not fenced.
	InHandler Mode = iota
	// AroundHandler: the middleware runs the whole handler inside the
	// Store's Do: check, then the handler, then the raise of the watermark
	// only if the handler answered 2xx. Requests for one object are served
	// one at a time (with MemoryStore, all fenced requests are, as
	// guard.Memory has one lock). With MemoryStore this protects a resource only when
	// every write to it goes through this one process: the lock and the
	// watermarks live in this process's memory, so a second replica (or a
	// restart, which forgets the watermarks) is not fenced. The handler's
	// response is buffered until the step is over (no streaming, no
	// http.Flusher), and the handler must finish its write before it
	// returns.
	AroundHandler
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case InHandler:
		return "InHandler"
	case AroundHandler:
		return "AroundHandler"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Config configures the middleware. Its zero value is valid: InHandler
// mode without a Store (handlers use their own guard via TokenFrom),
// writes fenced, GET, HEAD and OPTIONS not, the object taken from
// X-Resource-Id or else the URL path.
type Config struct {
	// Store checks tokens and raises watermarks atomically with the write.
	// Required in AroundHandler mode and for Do; nil is allowed in
	// InHandler mode when handlers use their own guard.
	Store Store
	// Mode is InHandler (the default) or AroundHandler.
	Mode Mode
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
	// TokenFrom's.
	Resolve func(r *http.Request) string
	// Issuer pins the resource to one issuer (cluster id): when not empty,
	// a request whose X-Fencing-Issuer differs or is missing is rejected
	// with 403 (guard.CheckIssuer). Empty accepts every issuer.
	Issuer string
	// Logger receives errors of the Store that are not fencing rejections
	// (the client gets a 500). Nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports a Config that New would refuse.
func (c Config) Validate() error {
	switch c.Mode {
	case InHandler:
	case AroundHandler:
		if c.Store == nil {
			return errors.New("httpfence: AroundHandler mode needs a Store; set Config.Store (for example MemoryStore(&guard.Memory{}))")
		}
	default:
		return fmt.Errorf("httpfence: unknown mode %d; want InHandler or AroundHandler", int(c.Mode))
	}
	return nil
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
// the handler hands Do's error to WriteError), 409 for a stale token; see
// WriteError for the bodies. Otherwise it calls next with a context that
// carries the object and token (TokenFrom, Do) and the presented issuer
// (guard.IssuerFromContext).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.cfg.Fenced(r) {
			next.ServeHTTP(w, r)
			return
		}
		t, err := token(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		object, err := m.object(r)
		if err != nil {
			writeRejection(w, http.StatusBadRequest, ReasonInvalidResource, errorBody{Error: err.Error()})
			return
		}
		ctx := r.Context()
		switch vs := r.Header.Values(HeaderIssuer); len(vs) {
		case 0:
		case 1:
			ctx = guard.ContextWithIssuer(ctx, vs[0])
		default:
			WriteError(w, fmt.Errorf("%w: %d %s headers; send one", fence.ErrIssuerMismatch, len(vs), HeaderIssuer))
			return
		}
		if err := guard.CheckIssuer(ctx, m.cfg.Issuer); err != nil {
			WriteError(w, err)
			return
		}
		f := &serverFence{object: object, token: t, store: m.cfg.Store}
		ctx = withServerFence(ctx, f)
		if m.cfg.Mode == InHandler {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		m.around(w, r.WithContext(ctx), f, next)
	})
}

// object returns the request's object: X-Resource-Id, else Config.Resolve.
func (m *Middleware) object(r *http.Request) (string, error) {
	switch vs := r.Header.Values(HeaderResourceID); len(vs) {
	case 0:
	case 1:
		if vs[0] != "" {
			return vs[0], nil
		}
	default:
		return "", fmt.Errorf("%w: %d %s headers; send one, naming the object the write is for", fence.ErrInvalidArgument, len(vs), HeaderResourceID)
	}
	if o := m.cfg.Resolve(r); o != "" {
		return o, nil
	}
	return "", fmt.Errorf("%w: no %s header and no object could be derived from the request; send %s naming the object the write is for", fence.ErrInvalidArgument, HeaderResourceID, HeaderResourceID)
}

// token parses the request's X-Fencing-Token.
func token(r *http.Request) (fence.Token, error) {
	vs := r.Header.Values(HeaderToken)
	switch len(vs) {
	case 0:
		return 0, fmt.Errorf("%w: missing %s header; a %s here needs the fencing token of your grant, a decimal number from 1 to %d", fence.ErrInvalidToken, HeaderToken, r.Method, uint64(fence.MaxToken))
	case 1:
	default:
		return 0, fmt.Errorf("%w: %d %s headers; send one", fence.ErrInvalidToken, len(vs), HeaderToken)
	}
	t, err := fence.ParseToken(vs[0])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", HeaderToken, err)
	}
	return t, nil
}

// errNotSuccess makes the Store leave the watermark unchanged when the
// handler answered other than 2xx.
var errNotSuccess = errors.New("httpfence: handler did not succeed")

// around runs next inside the Store's atomic step (AroundHandler).
func (m *Middleware) around(w http.ResponseWriter, r *http.Request, f *serverFence, next http.Handler) {
	var buf *bufferedResponse
	err := f.store.Do(r.Context(), f.object, f.token, func(ctx context.Context) error {
		held := *f
		held.held = true
		buf = &bufferedResponse{header: make(http.Header)}
		next.ServeHTTP(buf, r.WithContext(withServerFence(ctx, &held)))
		if !buf.success() {
			return errNotSuccess
		}
		return nil
	})
	switch {
	case buf != nil && (err == nil || errors.Is(err, errNotSuccess)):
		buf.writeTo(w)
	case err == nil:
		m.cfg.Logger.ErrorContext(r.Context(), "httpfence: store accepted the token without calling apply", "object", f.object, "token", f.token)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "httpfence: the fencing store did not run the handler"})
	case WriteError(w, err):
	default:
		m.cfg.Logger.ErrorContext(r.Context(), "httpfence: store failed", "object", f.object, "token", f.token, "handler_ran", buf != nil, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "httpfence: the fencing store failed; the write was not applied or its outcome is unknown"})
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
