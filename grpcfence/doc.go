// Package grpcfence fences writes to a gRPC service: server interceptors
// (unary and stream) and client interceptors carrying the fencing token in
// metadata, the gRPC counterpart of the HTTP convention of docs/design.md §5.
//
// # The convention
//
// A fenced call carries the metadata x-fencing-token (the token of the
// writer's grant, in decimal) and x-resource-id (the object it writes), and
// optionally x-fencing-issuer (the cluster that issued the token, for
// resources pinned to one issuer). The server answers:
//
//	codes.InvalidArgument     missing or malformed token or object
//	codes.FailedPrecondition  token below the watermark; trailer x-required-token: 9,
//	                          message "fence: stale token 7 for "obj": ... at least 9"
//	codes.PermissionDenied    token from another issuer
//
// Each rejection carries a google.rpc.ErrorInfo status detail with domain
// "fenced.dev" and a reason (STALE_TOKEN with the metadata object,
// presented and required; INVALID_TOKEN; INVALID_RESOURCE;
// ISSUER_MISMATCH), so clients tell it from the handler's own errors.
// Other errors of package fence a handler returns are sent with the code
// and reason the fenced server uses for them (VERSION_MISMATCH with the
// metadata object, expected and current; INVALID_ARGUMENT;
// SESSION_NOT_FOUND; NOT_GRANTED; LOCK_LOST; TOKEN_OVERFLOW; NOT_LEADER),
// and the client interceptors turn every one back into its fence error.
//
// # Atomic with the write
//
// An interceptor that checks the token and then calls the handler protects
// nothing: two calls can both pass the check before either writes, and the
// older one then writes last (docs/design.md §1, condition 3). The check, the
// write and the raise of the watermark must be one atomic step on the
// store. As in httpfence, there are two ways to get there.
//
// guard.InHandler (the default): the interceptor validates the metadata and
// puts the object and token into the handler's context; the handler makes
// its write through guard.Do, which runs it inside the atomic step of the
// configured fence.Guard, and returns Do's error as it is (the interceptor
// turns it into a status):
//
//	var marks guard.Memory
//	fi, _ := grpcfence.New(grpcfence.Config{Guard: &marks}) // or a postgres.Guard, ...
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fi.Unary), grpc.ChainStreamInterceptor(fi.Stream))
//
//	func (s *orders) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
//		err := guard.Do(ctx, func(ctx context.Context) error {
//			return s.db.Put(req.Id, req.Order) // the write, under the check
//		})
//		if err != nil {
//			return nil, err
//		}
//		return &pb.PutResponse{}, nil
//	}
//
// The context, Do and fence.Guard are shared with httpfence: one write
// function serves a gRPC and an HTTP handler alike. Any fence.Guard fits
// (postgres, sqlfence, redisfence, filefence, guard.Memory); each says what
// the write may do inside its step, such as using the transaction of
// postgres.TxFromContext. A handler may also call a guard of its own with
// the token of guard.TokenFrom, making its write in that guard's step. A
// handler that ignores guard.Do and guard.TokenFrom is not fenced.
//
// guard.AroundHandler: the interceptor runs the whole handler inside
// guard.Do, raising the watermark only if the handler returned no error.
// With a *guard.Memory guard that is a lock in this process: it protects a
// resource only this process writes, fenced calls are served one at a
// time, and the watermarks are lost on restart. See guard.AroundHandler
// and Config.Mode.
//
// # Client
//
// UnaryClientInterceptor and StreamClientInterceptor send the metadata from
// the call's context and turn rejections back into fence errors:
//
//	ctx := grpcfence.WithToken(ctx, "orders/42", grant.Token)
//	_, err := client.Put(ctx, req)
//	var stale *fence.StaleTokenError
//	if errors.As(err, &stale) {
//		// Our grant was superseded: stop, do not retry with this token.
//	}
package grpcfence
