// Package wireconnect carries the rejections of package wire in Connect
// errors: the code of the *connect.Error, its message, and the reason and
// fields in its metadata (HTTP headers, wire.Rejection.SetHeader). The
// fenced server encodes its errors with Error and the SDK decodes them
// with Decode. It is apart from package wire so that httpfence and
// grpcfence, which use wire, do not depend on Connect.
package wireconnect

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/internal/wire"
)

// Error returns the *connect.Error for err, which is or wraps a fence
// error, and true: the code of its kind, err's message, and its reason
// and fields in the metadata. For any other error it returns nil, false.
func Error(err error) (*connect.Error, bool) {
	r, ok := wire.Encode(err)
	if !ok {
		return nil, false
	}
	ce := connect.NewError(connect.Code(r.Code), err)
	r.SetHeader(ce.Meta())
	return ce, true
}

// Decode returns the fence error a *connect.Error in err carries, with
// call as the fallback for fields it lacks (wire.Rejection.Err). The
// result reads as the fence error and matches both it (errors.Is,
// errors.As) and the *connect.Error (connect.CodeOf). An error without a
// reason is decoded by its code where the code says enough (wire.ByCode).
// Any other error, and an error Decode already decoded, is returned
// unchanged.
func Decode(err error, call wire.Call) error {
	var ce *connect.Error
	if Decoded(err) || !errors.As(err, &ce) {
		return err
	}
	r := wire.FromHeader(wire.Code(ce.Code()), ce.Message(), ce.Meta())
	if r.Reason == "" {
		r.Reason = wire.ByCode(r.Code)
	}
	fe := r.Err(call)
	if fe == nil {
		return err
	}
	return &rejection{err: fe, ce: ce}
}

// Decoded reports whether err is, or wraps, a fence error Decode found:
// an answer of the server, which a retry would only repeat.
func Decoded(err error) bool {
	var r *rejection
	return errors.As(err, &r)
}

// rejection is a fence error the server reported, as Decode returns it.
type rejection struct {
	err error
	ce  *connect.Error
}

func (e *rejection) Error() string   { return e.err.Error() }
func (e *rejection) Unwrap() []error { return []error{e.err, e.ce} }
