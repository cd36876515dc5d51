package grpcfence

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// Config configures the server interceptors. Its zero value is valid:
// InHandler mode without a Guard (handlers use their own guard via
// guard.TokenFrom), every method fenced, the object taken from
// x-resource-id.
type Config struct {
	// Guard checks tokens and raises watermarks atomically with the write:
	// any fence.Guard, for example a *postgres.Guard, *sqlfence.Guard,
	// *redisfence.Guard, *filefence.Dir or *guard.Memory. Required in
	// AroundHandler mode and for guard.Do; nil is allowed in InHandler mode
	// when handlers use their own guard.
	Guard fence.Guard
	// Mode is guard.InHandler (the default) or guard.AroundHandler. In
	// AroundHandler mode a handler succeeds when it returns no error. A
	// unary response is sent after the guard's step is over; a streaming
	// handler's messages are sent as it goes, so if the step fails after
	// the handler returned, the client has seen its messages and then
	// receives the error status.
	Mode guard.Mode
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
	// it writes may compare it with guard.TokenFrom's.
	Resolve func(ctx context.Context, fullMethod string) string
	// Issuer pins the resource to one issuer (cluster id): when not empty,
	// a call whose x-fencing-issuer differs or is missing is rejected with
	// codes.PermissionDenied (guard.CheckIssuer). Empty accepts every
	// issuer.
	Issuer string
}

// Validate reports a Config that New would refuse: an unknown Mode, or
// AroundHandler without a Guard (guard.Mode.Validate).
func (c Config) Validate() error {
	return c.Mode.Validate(c.Guard)
}

// Interceptor is the server side of the gRPC fencing convention. Create it
// with New and install both of its interceptors:
//
//	fi, err := grpcfence.New(grpcfence.Config{Guard: &marks})
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
// (guard.TokenFrom, guard.Do) and the presented issuer
// (guard.IssuerFromContext). In AroundHandler mode the handler runs inside
// guard.Do. Fencing errors the handler returns become statuses (Error) and
// a stale token also sets the x-required-token trailer.
func (i *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !i.cfg.Fenced(info.FullMethod) {
		return handler(ctx, req)
	}
	fctx, err := i.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, fail(err, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	}
	var resp any
	if i.cfg.Mode == guard.InHandler {
		resp, err = handler(fctx, req)
	} else {
		err = guard.Do(fctx, func(ctx context.Context) error {
			var herr error
			resp, herr = handler(ctx, req)
			return herr
		})
	}
	if err != nil {
		return nil, fail(err, func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	}
	return resp, nil
}

// Stream is a grpc.StreamServerInterceptor with the behaviour of Unary. In
// AroundHandler mode the whole stream runs inside guard.Do.
func (i *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !i.cfg.Fenced(info.FullMethod) {
		return handler(srv, ss)
	}
	fctx, err := i.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return fail(err, ss.SetTrailer)
	}
	if i.cfg.Mode == guard.InHandler {
		err = handler(srv, &serverStream{ServerStream: ss, ctx: fctx})
	} else {
		err = guard.Do(fctx, func(ctx context.Context) error {
			return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
		})
	}
	if err != nil {
		return fail(err, ss.SetTrailer)
	}
	return nil
}

// admit validates a fenced call's metadata and returns the context to call
// the handler with.
func (i *Interceptor) admit(ctx context.Context, method string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p, err := guard.ParsePresented(md.Get, metadataFields, "a call of "+method)
	if errors.Is(err, fence.ErrInvalidArgument) {
		return nil, newStatus(codes.InvalidArgument, err.Error(), ReasonInvalidResource, nil)
	}
	if err != nil {
		return nil, err
	}
	object, t := p.Object, p.Token
	if object == "" && i.cfg.Resolve != nil {
		object = i.cfg.Resolve(ctx, method)
	}
	if object == "" {
		return nil, newStatus(codes.InvalidArgument, fmt.Sprintf("missing %s metadata; send it naming the object the write is for", MetadataResourceID), ReasonInvalidResource, nil)
	}
	if p.Issuer != "" {
		ctx = guard.ContextWithIssuer(ctx, p.Issuer)
	}
	if p.Grant != "" {
		ctx = guard.ContextWithGrant(ctx, p.Grant)
	}
	if err := guard.CheckIssuer(ctx, i.cfg.Issuer); err != nil {
		return nil, err
	}
	return guard.WithFence(ctx, object, t, i.cfg.Guard), nil
}

// metadataFields are the fencing metadata keys, for guard.ParsePresented.
var metadataFields = guard.Fields{Token: MetadataToken, Object: MetadataResourceID, Issuer: MetadataIssuer, Grant: MetadataGrant, Kind: "metadata", Plural: "values"}

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
