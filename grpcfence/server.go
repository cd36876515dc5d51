package grpcfence

import (
	"context"
	"errors"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// Mode says where the atomic step of check, write and raise happens.
type Mode int

const (
	// InHandler, the default: the interceptor validates the call's token,
	// object and issuer, rejects what is malformed, and passes the handler
	// a context carrying them. The handler makes its write through Do (the
	// Store's atomic step) or through its own guard with the token of
	// TokenFrom. A handler that writes without either is not fenced.
	InHandler Mode = iota
	// AroundHandler: the interceptor runs the whole handler inside the
	// Store's Do: check, then the handler, then the raise of the watermark
	// only if the handler returned no error. Calls for one object are
	// served one at a time (with MemoryStore, all fenced calls are). With
	// MemoryStore this protects a resource only when every write to it goes
	// through this one process: the lock and the watermarks live in this
	// process's memory, so a second replica (or a restart, which forgets
	// the watermarks) is not fenced. A unary response is sent after the
	// step is over; a streaming handler's messages are sent as it goes, so
	// if the step fails after the handler returned, the client has seen
	// its messages and then receives the error status. The handler must
	// finish its write before it returns.
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

// Config configures the server interceptors. Its zero value is valid:
// InHandler mode without a Store (handlers use their own guard via
// TokenFrom), every method fenced, the object taken from x-resource-id.
type Config struct {
	// Store checks tokens and raises watermarks atomically with the write.
	// Required in AroundHandler mode and for Do; nil is allowed in
	// InHandler mode when handlers use their own guard.
	Store Store
	// Mode is InHandler (the default) or AroundHandler.
	Mode Mode
	// Fenced reports whether calls of fullMethod ("/pkg.Service/Method")
	// must carry a token; other calls pass through untouched. Nil fences
	// every method, including services such as grpc.health.v1.Health that
	// share the server: exclude those here.
	Fenced func(fullMethod string) bool
	// Resolve returns the object of a call without x-resource-id metadata;
	// "" rejects the call with codes.InvalidArgument. Nil requires
	// x-resource-id.
	//
	// Fencing protects against delayed holders, not against clients that
	// lie: a client can name any object. A handler that knows which object
	// it writes may compare it with TokenFrom's.
	Resolve func(ctx context.Context, fullMethod string) string
	// Issuer pins the resource to one issuer (cluster id): when not empty,
	// a call whose x-fencing-issuer differs or is missing is rejected with
	// codes.PermissionDenied (guard.CheckIssuer). Empty accepts every
	// issuer.
	Issuer string
}

// Validate reports a Config that New would refuse.
func (c Config) Validate() error {
	switch c.Mode {
	case InHandler:
	case AroundHandler:
		if c.Store == nil {
			return errors.New("grpcfence: AroundHandler mode needs a Store; set Config.Store (for example MemoryStore(&guard.Memory{}))")
		}
	default:
		return fmt.Errorf("grpcfence: unknown mode %d; want InHandler or AroundHandler", int(c.Mode))
	}
	return nil
}

// Interceptor is the server side of the gRPC fencing convention. Create it
// with New and install both of its interceptors:
//
//	fi, err := grpcfence.New(grpcfence.Config{Store: grpcfence.MemoryStore(&marks)})
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fi.Unary), grpc.ChainStreamInterceptor(fi.Stream))
type Interceptor struct {
	cfg Config
}

// New returns interceptors configured by cfg, or the error of
// cfg.Validate.
func New(cfg Config) (*Interceptor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Fenced == nil {
		cfg.Fenced = func(string) bool { return true }
	}
	return &Interceptor{cfg: cfg}, nil
}

// Unary is a grpc.UnaryServerInterceptor. For a fenced call it rejects a
// missing or malformed token or object (codes.InvalidArgument) and an
// issuer the resource is not pinned to (codes.PermissionDenied); otherwise
// it calls the handler with a context carrying the object and token
// (TokenFrom, Do) and the presented issuer (guard.IssuerFromContext). In
// AroundHandler mode the handler runs inside the Store's Do. Fencing errors
// the handler returns become statuses (Error) and a stale token also sets
// the x-required-token trailer.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !i.cfg.Fenced(info.FullMethod) {
		return handler(ctx, req)
	}
	fctx, f, err := i.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, fail(err, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	}
	var resp any
	if i.cfg.Mode == InHandler {
		resp, err = handler(fctx, req)
	} else {
		err = f.store.Do(fctx, f.object, f.token, func(ctx context.Context) error {
			var herr error
			resp, herr = handler(held(ctx, f), req)
			return herr
		})
	}
	if err != nil {
		return nil, fail(err, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	}
	return resp, nil
}

// Stream is a grpc.StreamServerInterceptor with the behaviour of Unary. In
// AroundHandler mode the whole stream runs inside the Store's Do.
func (i *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !i.cfg.Fenced(info.FullMethod) {
		return handler(srv, ss)
	}
	fctx, f, err := i.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return fail(err, ss.SetTrailer)
	}
	if i.cfg.Mode == InHandler {
		err = handler(srv, &serverStream{ServerStream: ss, ctx: fctx})
	} else {
		err = f.store.Do(fctx, f.object, f.token, func(ctx context.Context) error {
			return handler(srv, &serverStream{ServerStream: ss, ctx: held(ctx, f)})
		})
	}
	if err != nil {
		return fail(err, ss.SetTrailer)
	}
	return nil
}

// admit validates a fenced call's metadata and returns the context to call
// the handler with.
func (i *Interceptor) admit(ctx context.Context, method string) (context.Context, *serverFence, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var t fence.Token
	switch vs := md.Get(MetadataToken); len(vs) {
	case 0:
		return nil, nil, fmt.Errorf("%w: missing %s metadata; a call of %s needs the fencing token of your grant, a decimal number from 1 to %d", fence.ErrInvalidToken, MetadataToken, method, uint64(fence.MaxToken))
	case 1:
		var err error
		if t, err = fence.ParseToken(vs[0]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", MetadataToken, err)
		}
	default:
		return nil, nil, fmt.Errorf("%w: %d %s values; send one", fence.ErrInvalidToken, len(vs), MetadataToken)
	}
	var object string
	switch vs := md.Get(MetadataResourceID); len(vs) {
	case 0:
	case 1:
		object = vs[0]
	default:
		return nil, nil, newStatus(codes.InvalidArgument, fmt.Sprintf("%d %s values; send one, naming the object the write is for", len(vs), MetadataResourceID), ReasonInvalidResource, nil)
	}
	if object == "" && i.cfg.Resolve != nil {
		object = i.cfg.Resolve(ctx, method)
	}
	if object == "" {
		return nil, nil, newStatus(codes.InvalidArgument, fmt.Sprintf("missing %s metadata; send it naming the object the write is for", MetadataResourceID), ReasonInvalidResource, nil)
	}
	switch vs := md.Get(MetadataIssuer); len(vs) {
	case 0:
	case 1:
		ctx = guard.ContextWithIssuer(ctx, vs[0])
	default:
		return nil, nil, fmt.Errorf("%w: %d %s values; send one", fence.ErrIssuerMismatch, len(vs), MetadataIssuer)
	}
	if err := guard.CheckIssuer(ctx, i.cfg.Issuer); err != nil {
		return nil, nil, err
	}
	f := &serverFence{object: object, token: t, store: i.cfg.Store}
	return withServerFence(ctx, f), f, nil
}

// held returns ctx marked as inside the interceptor's critical section.
func held(ctx context.Context, f *serverFence) context.Context {
	h := *f
	h.held = true
	return withServerFence(ctx, &h)
}

// fail converts err with Error and, for a stale token, sets the
// x-required-token trailer.
func fail(err error, setTrailer func(metadata.MD)) error {
	err = Error(err)
	if md := requiredTrailer(err); md != nil {
		setTrailer(md)
	}
	return err
}

// serverStream is a grpc.ServerStream with the fenced call's context.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
