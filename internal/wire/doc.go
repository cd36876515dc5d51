// Package wire is the one mapping between the errors of package fence and
// what travels on the wire: a status code (gRPC and Connect number their
// codes alike), a reason naming the fence error, and the fields of its
// concrete type (the presented and required token of a stale write, the
// expected and current version of a conditional one).
//
// The fenced server, httpfence and grpcfence encode with it, the SDK and
// grpcfence decode with it, so an error keeps its identity across the
// network: what a server handler returned matches the same fence error
// with errors.Is, and errors.As finds the same *fence.StaleTokenError or
// *fence.VersionMismatchError with the same fields, in the client.
// Nothing is ever matched by its message.
//
// Encode turns an error into a Rejection; Rejection.Err turns it back. A
// Rejection travels as HTTP headers on the Connect API (Rejection.SetHeader
// and FromHeader: X-Fencing-Error carries the reason, X-Required-Token and
// the others the fields; package wireconnect puts them in a
// *connect.Error and takes them out), as a google.rpc.ErrorInfo detail on
// gRPC (grpcfence builds it from Reason and Fields; the gRPC reason is the
// same name in upper case, GRPCReason), and as the status, X-Fencing-Error
// and X-Required-Token of the HTTP convention (httpfence.WriteError).
package wire
