package server

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// TestFingerprintOrdersInsideAMessageExtension: a proto2 request with a
// message-typed extension the program registered (extend Order { optional
// Line line = 100; }) is a message in the request like a field of its
// own: fields of Line this replica does not know (2 and 3, written by a
// newer schema) take their places by number, so that one request sent in
// either order has one fingerprint, as it has for a message field
// (attack26c). Before, the extension's body was hashed as received.
func TestFingerprintOrdersInsideAMessageExtension(t *testing.T) {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("fpext.proto"), Package: proto.String("fpext"), Syntax: proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{
			{
				Name:           proto.String("Order"),
				Field:          []*descriptorpb.FieldDescriptorProto{{Name: proto.String("id"), Number: proto.Int32(1), Type: str, Label: opt}},
				ExtensionRange: []*descriptorpb.DescriptorProto_ExtensionRange{{Start: proto.Int32(100), End: proto.Int32(200)}},
			},
			{Name: proto.String("Line"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("a"), Number: proto.Int32(1), Type: str, Label: opt}}},
		},
		Extension: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("line"), Number: proto.Int32(100), Label: opt, Extendee: proto.String(".fpext.Order"),
			Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".fpext.Line"),
		}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := protoregistry.GlobalTypes.RegisterExtension(dynamicpb.NewExtensionType(fd.Extensions().Get(0))); err != nil {
		t.Fatal(err)
	}
	str2 := func(b []byte, num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	order := func(line []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(str2(nil, 1, "o-1"), 100, protowire.BytesType), line)
	}
	inOrder := order(str2(str2(str2(nil, 1, "x"), 2, "y"), 3, "z"))
	swapped := order(str2(str2(str2(nil, 1, "x"), 3, "z"), 2, "y"))
	var fps []Fingerprint
	for _, b := range [][]byte{inOrder, swapped} {
		m := dynamicpb.NewMessage(fd.Messages().Get(0))
		if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		fp, err := fingerprint(m)
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, fp)
	}
	if fps[0] != fps[1] {
		t.Error("one request, its extension's unknown fields 2 and 3 in either order, has two fingerprints: a retry across versions would be refused as another request")
	}
	other := order(str2(str2(str2(nil, 1, "x"), 2, "y"), 3, "Z"))
	m := dynamicpb.NewMessage(fd.Messages().Get(0))
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(other, m); err != nil {
		t.Fatal(err)
	}
	if fp, _ := fingerprint(m); fp == fps[0] {
		t.Error("a request whose extension differs in one field has the same fingerprint")
	}
}
