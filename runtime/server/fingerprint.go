package server

import (
	"bytes"
	"crypto/sha256"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// fingerprint is the SHA-256 of req's deterministic serialization with the
// fields of every message in field-number order, unknown fields included
// (canonical).
func fingerprint(req any) (Fingerprint, error) {
	msg, ok := req.(proto.Message)
	if !ok {
		return Fingerprint{}, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return Fingerprint{}, err
	}
	md := msg.ProtoReflect().Descriptor()
	if ok, err := inOrder(b, md); err != nil {
		return Fingerprint{}, err
	} else if !ok {
		if b, err = canonical(b, md); err != nil {
			return Fingerprint{}, err
		}
	}
	return sha256.Sum256(b), nil
}

// inOrder reports whether canonical would return b unchanged: its fields,
// and those of its known message fields, are in field-number order. It
// allocates nothing, so that the usual request costs one scan.
func inOrder(b []byte, md protoreflect.MessageDescriptor) (bool, error) {
	last := protowire.Number(0)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false, protowire.ParseError(m)
		}
		if num < last {
			return false, nil
		}
		last = num
		if fd := messageField(md, num, typ); fd != nil {
			if ok, err := inOrder(fieldBody(num, typ, b[n:]), fd.Message()); !ok || err != nil {
				return false, err
			}
		}
		b = b[n+m:]
	}
	return true, nil
}

// messageField returns the field num of md when it is a known field (or
// an extension of md in protoregistry.GlobalTypes) of a message type (a message, a list of them, a map) written as bytes, or a
// group (proto2's, or an editions message field with DELIMITED encoding)
// written as one, and nil otherwise.
func messageField(md protoreflect.MessageDescriptor, num protowire.Number, typ protowire.Type) protoreflect.FieldDescriptor {
	if md == nil || typ != protowire.BytesType && typ != protowire.StartGroupType {
		return nil
	}
	fd := md.Fields().ByNumber(num)
	if fd == nil && md.ExtensionRanges().Has(num) {
		// An extension the program registered is a known field too.
		if xt, err := protoregistry.GlobalTypes.FindExtensionByNumber(md.FullName(), num); err == nil {
			fd = xt.TypeDescriptor()
		}
	}
	if fd == nil || fd.Message() == nil || (fd.Kind() == protoreflect.GroupKind) != (typ == protowire.StartGroupType) {
		return nil
	}
	return fd
}

// fieldBody is the message inside the value b of a field that
// messageField returned: its bytes, or a group's fields (without its end).
func fieldBody(num protowire.Number, typ protowire.Type, b []byte) []byte {
	if typ == protowire.StartGroupType {
		inner, _ := protowire.ConsumeGroup(num, b)
		return inner
	}
	inner, _ := protowire.ConsumeBytes(b)
	return inner
}

// canonical returns b, a message of descriptor md as proto.Marshal writes
// it deterministically, with its fields in field-number order, and so
// those of each message field whose type md knows. The deterministic
// serialization writes the known fields in that order and the unknown
// ones after them, as received: a replica that does not know a field (one
// an older or a newer version of the schema has) would otherwise write
// the very same request in another order than a replica that does, and a
// retry that reaches it during a rolling deploy would be refused as
// another request. Values of one field number keep their order (a list
// is not a set).
func canonical(b []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	type record struct {
		num protowire.Number
		b   []byte
	}
	var recs []record
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		r := rest[:n+m]
		if fd := messageField(md, num, typ); fd != nil {
			inner := fieldBody(num, typ, rest[n:])
			c, err := canonical(inner, fd.Message())
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(c, inner) {
				if typ == protowire.StartGroupType {
					r = protowire.AppendTag(append(protowire.AppendTag(nil, num, typ), c...), num, protowire.EndGroupType)
				} else {
					r = protowire.AppendBytes(protowire.AppendTag(nil, num, typ), c)
				}
			}
		}
		recs = append(recs, record{num, r})
		rest = rest[n+m:]
	}
	slices.SortStableFunc(recs, func(x, y record) int { return int(x.num) - int(y.num) })
	out := make([]byte, 0, len(b))
	for _, r := range recs {
		out = append(out, r.b...)
	}
	return out, nil
}
