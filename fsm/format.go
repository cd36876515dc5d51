package fsm

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The replicated format (docs/operations.md, "Upgrades"). Every log entry
// and every snapshot carries the format version it was written in
// (Command.format_version on the entry's outer command, State.format_version);
// an entry or snapshot without one was written before versions existed and
// is version 1. A member applies the versions MinFormatVersion to
// FormatVersion and stops at any other: applying what it does not
// understand, or skipping it, would make its state, and the tokens it
// issues, differ from the other members'.
//
// The upgrade rule: a release that introduces version N+1 still applies
// versions up to N, and writes N+1 only for commands that need it. A
// cluster is upgraded one member at a time, each back and caught up before
// the next; a feature that writes version N+1 may be used only once every
// member runs a release that applies N+1. A member that meets N+1 before
// it is upgraded stops with ErrFormatVersion and the version it met, and
// starts again once it is upgraded (the entry is still in its log).
//
// What a newer release adds is refused structurally, without a version
// bump: an entry or snapshot holding a field this build does not know
// (protobuf would skip it silently), a command of a kind it does not know
// (a new case of Command.op is such a field) or an enum value it does not
// know is refused as a newer version is (checkKnown). proto3 writes a
// field only when it is set, so a release's new field stops an older
// member exactly when a command or state that uses it reaches it, never
// before. What needs a version bump is a change of meaning of what an
// older build knows (the same fields applied differently): a release
// never makes one without a new field, kind or value to carry it, or a
// FormatVersion above the last (doc.go, "How to add a primitive").
const (
	// FormatVersion is the newest format version this build applies, and
	// the version it writes.
	FormatVersion uint32 = 1
	// MinFormatVersion is the oldest format version this build applies.
	MinFormatVersion uint32 = 1
)

// ErrFormatVersion is the error of an entry or snapshot written in a
// format version this build does not apply, or holding a field, kind or
// enum value it does not know. It has a method NewerFormat, reporting
// true, by which the Raft glue tells such an entry (upgrade the node) from
// a damaged one without importing this package.
var ErrFormatVersion error = formatError("fsm: replicated format version not understood")

// formatError is the type of ErrFormatVersion.
type formatError string

func (e formatError) Error() string { return string(e) }

// NewerFormat reports that a newer release wrote what was refused.
func (formatError) NewerFormat() bool { return true }

// formatOf returns the format version a message carries: 0 is version 1.
func formatOf(v uint32) uint32 {
	if v == 0 {
		return 1
	}
	return v
}

// applies reports whether this build applies format version v (0 is 1).
func applies(v uint32) bool {
	v = formatOf(v)
	return v >= MinFormatVersion && v <= FormatVersion
}

// checkFormat returns an error matching ErrFormatVersion unless version v
// (0 is 1) of what names is one this build applies.
func checkFormat(what string, v uint32) error {
	if applies(v) {
		return nil
	}
	v = formatOf(v)
	return fmt.Errorf("%w: %s is in format version %d; this build applies versions %d to %d: run a fenced release that applies version %d on this member (docs/operations.md, \"Upgrades\"); the node stops rather than skip it", ErrFormatVersion, what, v, MinFormatVersion, FormatVersion, v)
}

// checkKnown returns an error matching ErrFormatVersion if m, or a message
// anywhere in it, holds a field this build does not know or an enum field
// a value this build does not know. what names m for the error, with its
// index i in a batch when batch is set; the name is formatted only for
// the error, so a known message costs the walk and no allocation.
func checkKnown(m protoreflect.Message, what string, i int, batch bool) error {
	where := unknownIn(m)
	if where == "" {
		return nil
	}
	if batch {
		what = fmt.Sprintf("command %d of the batch", i)
	}
	return fmt.Errorf("%w: %s has fields this build does not know (%s): a newer release wrote it; upgrade this node (docs/operations.md, \"Upgrades\"); the node stops rather than apply it without them", ErrFormatVersion, what, where)
}

// unknownIn describes the first field or enum value this build does not
// know anywhere in m, or returns "". It visits only the fields that can
// hold one (messages and enums, listed once per message type by
// walkPlanOf) and that are set, without a closure (Range's would be
// allocated at every level of every command); only a map, which no
// replicated message has today, is ranged.
func unknownIn(m protoreflect.Message) string {
	if u := m.GetUnknown(); len(u) > 0 {
		num, _, _ := protowire.ConsumeTag(u)
		return fmt.Sprintf("field %d of %s", num, m.Descriptor().FullName())
	}
	plan := walkPlanOf(m.Descriptor())
	for _, od := range plan.oneofs {
		if fd := m.WhichOneof(od); fd != nil {
			if where := unknownValue(fd, m.Get(fd)); where != "" {
				return where
			}
		}
	}
	for _, fd := range plan.fields {
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			where := ""
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				where = unknownValue(fd.MapValue(), mv)
				return where == ""
			})
			if where != "" {
				return where
			}
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				if where := unknownValue(fd, l.Get(j)); where != "" {
					return where
				}
			}
		default:
			if where := unknownValue(fd, v); where != "" {
				return where
			}
		}
	}
	return ""
}

// walkPlan lists the fields of a message type that can hold a field or
// enum value this build does not know: those of message, group or enum
// kind (a map's when its values are). A oneof is listed once, and its set
// member looked up; the other fields are each checked for presence.
type walkPlan struct {
	oneofs []protoreflect.OneofDescriptor
	fields []protoreflect.FieldDescriptor
}

// walkPlans holds the walkPlan of each message type walked so far.
var walkPlans sync.Map // protoreflect.MessageDescriptor -> *walkPlan

// walkPlanOf returns the walkPlan of md, made once per message type; a
// type with no such fields has an empty one, and its walk ends at its
// unknown bytes.
func walkPlanOf(md protoreflect.MessageDescriptor) *walkPlan {
	if p, ok := walkPlans.Load(md); ok {
		return p.(*walkPlan)
	}
	plan := &walkPlan{}
	oneofs := md.Oneofs()
	for i := range oneofs.Len() {
		plan.oneofs = append(plan.oneofs, oneofs.Get(i))
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		kind := fd.Kind()
		if fd.IsMap() {
			kind = fd.MapValue().Kind()
		}
		if fd.ContainingOneof() == nil && (kind == protoreflect.MessageKind || kind == protoreflect.GroupKind || kind == protoreflect.EnumKind) {
			plan.fields = append(plan.fields, fd)
		}
	}
	walkPlans.Store(md, plan)
	return plan
}

// unknownValue is unknownIn for one value of field fd: a message is
// walked, an enum number is looked up among fd's enum's values.
func unknownValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return unknownIn(v.Message())
	case protoreflect.EnumKind:
		if n := v.Enum(); fd.Enum().Values().ByNumber(n) == nil {
			return fmt.Sprintf("value %d of %s", n, fd.FullName())
		}
	}
	return ""
}
