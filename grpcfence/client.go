package grpcfence

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/guard"
)

// WithToken returns a context whose calls, made through a connection with
// the client interceptors, carry token t for object (x-fencing-token,
// x-resource-id metadata). An empty object sends no x-resource-id. A later
// WithToken replaces an earlier one; an issuer set by WithIssuer is kept.
//
// It is guard.WithOutgoingToken: the token is not tied to gRPC, and HTTP
// requests made with the context through an httpfence.Transport carry it
// too.
func WithToken(ctx context.Context, object string, t fence.Token) context.Context {
	return guard.WithOutgoingToken(ctx, object, t)
}

// WithGrant returns a context whose fenced calls carry grant g for object:
// x-fencing-token, x-fencing-issuer and, when the cluster signed it,
// x-fencing-grant (g.Signed), which a resource behind guard.Signed
// requires. It is guard.WithOutgoingGrant.
func WithGrant(ctx context.Context, object string, g fence.Grant) context.Context {
	return guard.WithOutgoingGrant(ctx, object, g)
}

// WithIssuer returns a context whose fenced calls also carry
// x-fencing-issuer: the issuer (cluster id, the Issuer of a fence.Grant) of
// the token, for resources pinned to one issuer. It is
// guard.WithOutgoingIssuer.
func WithIssuer(ctx context.Context, issuer string) context.Context {
	return guard.WithOutgoingIssuer(ctx, issuer)
}

// outgoing adds the context's fence to its outgoing metadata, replacing
// values already there.
func outgoing(ctx context.Context) (context.Context, guard.Outgoing) {
	o, ok := guard.OutgoingFromContext(ctx)
	if !ok {
		return ctx, o
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(MetadataToken, o.Token.String())
	if o.Object != "" {
		md.Set(MetadataResourceID, o.Object)
	}
	if o.Issuer != "" {
		md.Set(MetadataIssuer, o.Issuer)
	}
	if o.Grant != "" {
		md.Set(MetadataGrant, o.Grant)
	}
	return metadata.NewOutgoingContext(ctx, md), o
}

// UnaryClientInterceptor is a grpc.UnaryClientInterceptor that sends the
// token, object and issuer of the call's context (WithToken, WithIssuer) as
// metadata and turns fencing rejections into errors:
//
//   - codes.FailedPrecondition with a STALE_TOKEN detail or an
//     x-required-token trailer: an error that errors.As finds a
//     *fence.StaleTokenError in, with the object, the presented and the
//     required token;
//   - codes.InvalidArgument with an INVALID_TOKEN detail: an error
//     matching fence.ErrInvalidToken (INVALID_RESOURCE:
//     fence.ErrInvalidArgument);
//   - codes.PermissionDenied with an ISSUER_MISMATCH detail: an error
//     matching fence.ErrIssuerMismatch (INVALID_GRANT:
//     fence.ErrInvalidGrant).
//
// These errors keep their status: status.Code and status.FromError work on
// them as on any gRPC error. Other errors are returned unchanged.
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(grpcfence.UnaryClientInterceptor),
//		grpc.WithStreamInterceptor(grpcfence.StreamClientInterceptor), ...)
func UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, o := outgoing(ctx)
	var trailer metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer))...)
	if err != nil {
		return clientError(err, trailer, o.Object, o.Token)
	}
	return nil
}

// StreamClientInterceptor is a grpc.StreamClientInterceptor with the
// behaviour of UnaryClientInterceptor; a stream's rejection arrives as the
// error of RecvMsg.
func StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, o := outgoing(ctx)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, clientError(err, nil, o.Object, o.Token)
	}
	return &clientStream{ClientStream: cs, o: o}, nil
}

// clientStream maps the status a stream ends with.
type clientStream struct {
	grpc.ClientStream
	o guard.Outgoing
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil && err != io.EOF {
		return clientError(err, s.Trailer(), s.o.Object, s.o.Token)
	}
	return err
}
