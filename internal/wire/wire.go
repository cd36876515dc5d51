package wire

import (
	"errors"
	"strconv"
	"strings"

	fence "github.com/fenced-dev/fenced"
)

// Code is a status code. gRPC and Connect number their codes alike, so
// connect.Code(c) and codes.Code(c) are the same code.
type Code uint32

// The codes fence errors travel with.
const (
	CodeInvalidArgument    Code = 3
	CodeNotFound           Code = 5
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeUnavailable        Code = 14
)

// Reasons name the fence error a rejection stands for.
const (
	ReasonInvalidArgument = "invalid-argument"
	// ReasonInvalidResource is the reason fencing middleware sends when it
	// cannot determine the object a write is for. It decodes to
	// fence.ErrInvalidArgument; Encode never chooses it.
	ReasonInvalidResource = "invalid-resource"
	ReasonInvalidToken    = "invalid-token"
	ReasonStaleToken      = "stale-token"
	ReasonIssuerMismatch  = "issuer-mismatch"
	ReasonInvalidGrant    = "invalid-grant"
	ReasonVersionMismatch = "version-mismatch"
	ReasonSessionNotFound = "session-not-found"
	ReasonNotGranted      = "not-granted"
	ReasonLockLost        = "lock-lost"
	ReasonTokenOverflow   = "token-overflow"
	ReasonNotLeader       = "not-leader"
	ReasonLimitExceeded   = "limit-exceeded"
	ReasonNotOwner        = "not-owner"
	ReasonPermission      = "permission-denied"
	ReasonScopeMismatch   = "scope-mismatch"
	ReasonCapacity        = "capacity-mismatch"
)

// Fields of a rejection, the values of the concrete error type. Tokens and
// versions are decimal.
const (
	// FieldObject names the object (resource id, kv key) of a stale write
	// or of a version mismatch.
	FieldObject = "object"
	// FieldPresented is the token a stale write presented.
	FieldPresented = "presented"
	// FieldRequired is the lowest token the object accepts now.
	FieldRequired = "required"
	// FieldExpected is the version a conditional write expected.
	FieldExpected = "expected"
	// FieldCurrent is the object's version when the write was rejected.
	FieldCurrent = "current"
	// FieldScope is the scope a scope-mismatched token belongs to (empty:
	// no grant in force).
	FieldScope = "scope"
	// FieldKind is the kind of grant a scope-mismatched token belongs to.
	FieldKind = "kind"
	// FieldRequiredScope is the scope a scope-mismatched write needed.
	FieldRequiredScope = "required-scope"
)

// kind is one row of the table: a fence error, its code and its reason.
type kind struct {
	err    error
	code   Code
	reason string
	// byCode marks the kind a Connect error of this code without a reason
	// stands for (see ByCode).
	byCode bool
}

// kinds is the table. Encode takes the first row whose error matches, so
// an error matching several (a lost lock whose session is gone) is sent
// as the first: the rejections of the fencing conventions first, in the
// order httpfence and grpcfence always checked them, then the more
// specific errors before the more general.
var kinds = []kind{
	{fence.ErrStaleToken, CodeFailedPrecondition, ReasonStaleToken, false},
	{fence.ErrInvalidToken, CodeInvalidArgument, ReasonInvalidToken, false},
	// Before the issuer: a signed grant of another issuer matches both.
	{fence.ErrInvalidGrant, CodePermissionDenied, ReasonInvalidGrant, false},
	{fence.ErrIssuerMismatch, CodePermissionDenied, ReasonIssuerMismatch, false},
	{fence.ErrScopeMismatch, CodePermissionDenied, ReasonScopeMismatch, false},
	{fence.ErrVersionMismatch, CodeAborted, ReasonVersionMismatch, false},
	{fence.ErrInvalidArgument, CodeInvalidArgument, ReasonInvalidArgument, true},
	{fence.ErrInvalidArgument, CodeInvalidArgument, ReasonInvalidResource, false},
	{fence.ErrTokenOverflow, CodeResourceExhausted, ReasonTokenOverflow, false},
	{fence.ErrLockLost, CodeAborted, ReasonLockLost, false},
	{fence.ErrSessionNotFound, CodeNotFound, ReasonSessionNotFound, true},
	{fence.ErrNotGranted, CodeAborted, ReasonNotGranted, false},
	{fence.ErrNotLeader, CodeUnavailable, ReasonNotLeader, false},
	{fence.ErrLimitExceeded, CodeResourceExhausted, ReasonLimitExceeded, false},
	{fence.ErrNotOwner, CodePermissionDenied, ReasonNotOwner, false},
	{fence.ErrPermissionDenied, CodePermissionDenied, ReasonPermission, false},
	{fence.ErrCapacityMismatch, CodeFailedPrecondition, ReasonCapacity, false},
}

// Rejection is a fence error as it travels: code, reason, the message of
// the original error and the fields of its concrete type.
type Rejection struct {
	Code    Code
	Reason  string
	Message string
	// Fields holds the Field values the error carries; nil when none.
	Fields map[string]string
}

// Encode returns the rejection for err, which is or wraps a fence error,
// and true; for any other error (and nil) it returns false.
func Encode(err error) (Rejection, bool) {
	if err == nil {
		return Rejection{}, false
	}
	for _, k := range kinds {
		if !errors.Is(err, k.err) {
			continue
		}
		r := Rejection{Code: k.code, Reason: k.reason, Message: err.Error()}
		var se *fence.StaleTokenError
		var vm *fence.VersionMismatchError
		var sm *fence.ScopeMismatchError
		switch {
		case errors.As(err, &sm):
			r.Fields = map[string]string{FieldObject: sm.Object, FieldPresented: sm.Presented.String(), FieldRequiredScope: sm.Required}
			if sm.Scope != "" {
				r.Fields[FieldKind], r.Fields[FieldScope] = string(sm.Kind), sm.Scope
			}
		case errors.As(err, &se):
			r.Fields = map[string]string{FieldPresented: se.Presented.String(), FieldRequired: se.Required.String()}
			if se.Object != "" {
				r.Fields[FieldObject] = se.Object
			}
		case errors.As(err, &vm):
			r.Fields = map[string]string{FieldObject: vm.Object,
				FieldExpected: strconv.FormatInt(vm.Expected, 10), FieldCurrent: strconv.FormatInt(vm.Current, 10)}
		}
		return r, true
	}
	return Rejection{}, false
}

// ByCode returns the reason a Connect error of code c stands for when it
// came without one (fenced servers sent only the code before they sent
// reasons, and Connect answers a malformed request by itself): an invalid
// argument, or a session not found. It is "" for the codes that say
// nothing without a reason; ResourceExhausted, for one, is also Connect's
// answer to a message above the size limit, not a token overflow.
func ByCode(c Code) string {
	for _, k := range kinds {
		if k.byCode && k.code == c {
			return k.reason
		}
	}
	return ""
}

// Call is what the client sent: the fallback for fields a rejection does
// not carry (a server that sent only the required token, say).
type Call struct {
	Object string
	Token  fence.Token
}

// Err returns the fence error r stands for, or nil when r names none: no
// reason, an unknown one, or a code that does not go with the reason. A
// stale token with a valid required token is a *fence.StaleTokenError
// (Object and Presented from call when r lacks them); a version mismatch
// with both versions is a *fence.VersionMismatchError; otherwise the error
// wraps the fence sentinel and reads as r.Message.
func (r Rejection) Err(call Call) error {
	k, ok := lookup(r.Reason)
	if !ok || k.code != r.Code {
		return nil
	}
	switch k.reason {
	case ReasonStaleToken:
		if se, ok := r.stale(call); ok {
			return se
		}
	case ReasonVersionMismatch:
		if vm, ok := r.versionMismatch(call); ok {
			return vm
		}
	case ReasonScopeMismatch:
		if sm, ok := r.scopeMismatch(call); ok {
			return sm
		}
	}
	if r.Message == "" {
		return k.err
	}
	return &rejected{msg: r.Message, err: k.err}
}

func (r Rejection) stale(call Call) (*fence.StaleTokenError, bool) {
	req, err := fence.ParseToken(r.Fields[FieldRequired])
	if err != nil {
		return nil, false
	}
	se := &fence.StaleTokenError{Object: r.Fields[FieldObject], Presented: call.Token, Required: req}
	if se.Object == "" {
		se.Object = call.Object
	}
	if p, err := fence.ParseToken(r.Fields[FieldPresented]); err == nil {
		se.Presented = p
	}
	return se, true
}

func (r Rejection) versionMismatch(call Call) (*fence.VersionMismatchError, bool) {
	exp, err1 := strconv.ParseInt(r.Fields[FieldExpected], 10, 64)
	cur, err2 := strconv.ParseInt(r.Fields[FieldCurrent], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	vm := &fence.VersionMismatchError{Object: r.Fields[FieldObject], Expected: exp, Current: cur}
	if vm.Object == "" {
		vm.Object = call.Object
	}
	return vm, true
}

// scopeMismatch is the *fence.ScopeMismatchError of a rejection that
// names the scope the write needed; a token of no live grant travels with
// no kind and no scope.
func (r Rejection) scopeMismatch(call Call) (*fence.ScopeMismatchError, bool) {
	if r.Fields[FieldRequiredScope] == "" {
		return nil, false
	}
	sm := &fence.ScopeMismatchError{Object: r.Fields[FieldObject], Presented: call.Token, Required: r.Fields[FieldRequiredScope],
		Kind: fence.Kind(r.Fields[FieldKind]), Scope: r.Fields[FieldScope]}
	if sm.Object == "" {
		sm.Object = call.Object
	}
	if p, err := fence.ParseToken(r.Fields[FieldPresented]); err == nil {
		sm.Presented = p
	}
	return sm, true
}

func lookup(reason string) (kind, bool) {
	for _, k := range kinds {
		if k.reason == reason {
			return k, true
		}
	}
	return kind{}, false
}

// rejected is a decoded rejection without a concrete type: it reads as the
// server's message and matches the fence error.
type rejected struct {
	msg string
	err error
}

func (e *rejected) Error() string { return e.msg }
func (e *rejected) Unwrap() error { return e.err }

// GRPCReason returns the google.rpc.ErrorInfo reason of reason: the same
// name in upper case with underscores ("stale-token" is "STALE_TOKEN").
func GRPCReason(reason string) string {
	return strings.ToUpper(strings.ReplaceAll(reason, "-", "_"))
}

// FromGRPCReason is the inverse of GRPCReason.
func FromGRPCReason(reason string) string {
	return strings.ToLower(strings.ReplaceAll(reason, "_", "-"))
}
