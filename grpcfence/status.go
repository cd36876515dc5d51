package grpcfence

import (
	"errors"
	"maps"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/wire"
)

// Metadata keys of the gRPC fencing convention, the counterparts of the
// HTTP headers of docs/design.md §5.
const (
	// MetadataToken carries the writer's fencing token, in decimal.
	MetadataToken = "x-fencing-token"
	// MetadataResourceID names the protected object the call writes.
	MetadataResourceID = "x-resource-id"
	// MetadataIssuer carries the issuer (cluster id) of the token, for
	// resources pinned to one issuer.
	MetadataIssuer = "x-fencing-issuer"
	// MetadataGrant carries the signed grant of the token (fence.Grant's
	// Signed), for resources behind guard.Signed.
	MetadataGrant = "x-fencing-grant"
	// MetadataRequiredToken is the trailer that carries, on a stale token,
	// the lowest token the object accepts now (its watermark).
	MetadataRequiredToken = "x-required-token"
)

// Domain is the ErrorInfo domain of the status details this package sends.
const Domain = "fenced.dev"

// Reasons of the google.rpc.ErrorInfo detail (domain Domain) attached to
// every rejection. A stale token's ErrorInfo has the metadata "object",
// "presented" and "required" (tokens in decimal).
const (
	// ReasonStaleToken: the token is below the object's watermark
	// (codes.FailedPrecondition).
	ReasonStaleToken = "STALE_TOKEN"
	// ReasonInvalidToken: the token is missing or malformed, 0 or above
	// fence.MaxToken, or it or x-fencing-issuer was sent twice
	// (codes.InvalidArgument).
	ReasonInvalidToken = "INVALID_TOKEN"
	// ReasonInvalidResource: no object could be determined for the call,
	// or x-resource-id was sent twice (codes.InvalidArgument).
	ReasonInvalidResource = "INVALID_RESOURCE"
	// ReasonIssuerMismatch: the token comes from another issuer than the
	// one the resource is pinned to, or none was presented
	// (codes.PermissionDenied).
	ReasonIssuerMismatch = "ISSUER_MISMATCH"
	// ReasonInvalidGrant: the resource requires a signed grant
	// (guard.Signed) and the one presented is missing, sent twice, does not
	// verify, or is for another token, issuer or scope
	// (codes.PermissionDenied).
	ReasonInvalidGrant = "INVALID_GRANT"
)

// Error returns the gRPC status error for a fencing error, so a handler
// can return guard.Do's error (or its own guard's) as it is:
//
//   - a *fence.StaleTokenError (or any error matching fence.ErrStaleToken):
//     codes.FailedPrecondition, the message naming the presented and the
//     required token;
//   - an error matching fence.ErrInvalidToken: codes.InvalidArgument;
//   - an error matching fence.ErrIssuerMismatch: codes.PermissionDenied
//     (retrying cannot help: the token comes from another cluster);
//   - an error matching fence.ErrInvalidGrant (guard.Signed):
//     codes.PermissionDenied, reason INVALID_GRANT;
//   - any other error of package fence: the code and reason the fenced
//     server sends for it (a *fence.VersionMismatchError is
//     codes.Aborted, reason VERSION_MISMATCH, metadata "object",
//     "expected" and "current"; fence.ErrNotLeader is codes.Unavailable,
//     reason NOT_LEADER; see package doc).
//
// Each status carries a google.rpc.ErrorInfo detail with Domain and a
// Reason. The server interceptors apply Error to every error a fenced
// handler returns and add the x-required-token trailer, so a handler behind
// them needs Error only to convert errors itself. An error that already
// carries a gRPC status, and any other error, is returned unchanged; nil
// stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return err
	}
	r, ok := wire.Encode(err)
	if !ok {
		return err
	}
	return newStatus(codes.Code(r.Code), r.Message, wire.GRPCReason(r.Reason), r.Fields)
}

// newStatus returns a status error with an ErrorInfo detail.
func newStatus(c codes.Code, msg, reason string, md map[string]string) error {
	st := status.New(c, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}); err == nil {
		st = d
	}
	return st.Err()
}

// errorInfo returns the ErrorInfo of this package's Domain in st, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == Domain {
			return ei
		}
	}
	return nil
}

// requiredTrailer returns the x-required-token trailer for a stale-token
// status error, or nil.
func requiredTrailer(err error) metadata.MD {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil
	}
	ei := errorInfo(st)
	if ei.GetReason() != ReasonStaleToken || ei.GetMetadata()[wire.FieldRequired] == "" {
		return nil
	}
	return metadata.Pairs(MetadataRequiredToken, ei.GetMetadata()[wire.FieldRequired])
}

// clientError maps a status error received by a client back to the fencing
// error it stands for, keeping the status: the result matches the fence
// error with errors.Is and errors.As and still answers status.Code. The
// object and token sent are the fallbacks for a detail the server did not
// send; a FailedPrecondition without a detail but with the x-required-token
// trailer (a server that follows only the trailer convention) is a stale
// token. Any other error is returned unchanged.
func clientError(err error, trailer metadata.MD, object string, sent fence.Token) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	ei := errorInfo(st)
	r := wire.Rejection{Code: wire.Code(st.Code()), Reason: wire.FromGRPCReason(ei.GetReason()), Message: st.Message(), Fields: maps.Clone(ei.GetMetadata())}
	if req := trailer.Get(MetadataRequiredToken); len(req) > 0 && r.Code == wire.CodeFailedPrecondition && r.Fields[wire.FieldRequired] == "" {
		if r.Fields == nil {
			r.Fields = map[string]string{}
		}
		r.Reason, r.Fields[wire.FieldRequired] = wire.ReasonStaleToken, req[0]
	}
	fe := r.Err(wire.Call{Object: object, Token: sent})
	if fe == nil {
		return err
	}
	return &rpcError{st: st, err: fe}
}

// rpcError is a fencing rejection as a client sees it: the gRPC status (for
// status.Code and status.FromError) wrapping the fence error (for errors.Is
// and errors.As).
type rpcError struct {
	st  *status.Status
	err error
}

func (e *rpcError) Error() string              { return e.st.Err().Error() }
func (e *rpcError) Unwrap() error              { return e.err }
func (e *rpcError) GRPCStatus() *status.Status { return e.st }
