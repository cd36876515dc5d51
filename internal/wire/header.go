package wire

import "net/http"

// Headers of a rejection on the Connect API (the metadata of a
// *connect.Error) and in a Pipeline error. They are the headers of the
// HTTP fencing convention where one exists (httpfence uses the same
// names).
const (
	// HeaderReason carries the reason.
	HeaderReason = "X-Fencing-Error"
	// HeaderObject carries FieldObject.
	HeaderObject = "X-Resource-Id"
	// HeaderPresented carries FieldPresented.
	HeaderPresented = "X-Fencing-Token"
	// HeaderRequired carries FieldRequired.
	HeaderRequired = "X-Required-Token"
	// HeaderExpected carries FieldExpected.
	HeaderExpected = "X-Expected-Version"
	// HeaderCurrent carries FieldCurrent.
	HeaderCurrent = "X-Current-Version"
	// HeaderKind carries FieldKind.
	HeaderKind = "X-Token-Kind"
	// HeaderScope carries FieldScope.
	HeaderScope = "X-Token-Scope"
	// HeaderRequiredScope carries FieldRequiredScope.
	HeaderRequiredScope = "X-Required-Scope"
)

// fieldHeaders pairs each field with its header.
var fieldHeaders = []struct{ field, header string }{
	{FieldObject, HeaderObject},
	{FieldPresented, HeaderPresented},
	{FieldRequired, HeaderRequired},
	{FieldExpected, HeaderExpected},
	{FieldCurrent, HeaderCurrent},
	{FieldKind, HeaderKind},
	{FieldScope, HeaderScope},
	{FieldRequiredScope, HeaderRequiredScope},
}

// SetHeader writes r's reason and fields into h.
func (r Rejection) SetHeader(h http.Header) {
	h.Set(HeaderReason, r.Reason)
	for _, fh := range fieldHeaders {
		if v, ok := r.Fields[fh.field]; ok {
			h.Set(fh.header, v)
		}
	}
}

// FromHeader reads the rejection of code and message whose reason and
// fields h carries (as SetHeader wrote them). Its Reason is "" when h has
// none.
func FromHeader(code Code, message string, h http.Header) Rejection {
	r := Rejection{Code: code, Reason: h.Get(HeaderReason), Message: message}
	for _, fh := range fieldHeaders {
		if v := h.Get(fh.header); v != "" {
			if r.Fields == nil {
				r.Fields = map[string]string{}
			}
			r.Fields[fh.field] = v
		}
	}
	return r
}
