package rules

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func TestFilterRawKeepsOrderAndDropsRefused(t *testing.T) {
	var raw []byte
	raw = protowire.AppendTag(raw, 1051, protowire.BytesType)
	raw = protowire.AppendBytes(raw, []byte("a"))
	raw = protowire.AppendTag(raw, 7, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 3)
	other := len(raw)
	raw = protowire.AppendTag(raw, 1051, protowire.BytesType)
	raw = protowire.AppendBytes(raw, []byte("b"))
	opts := &descriptorpb.MethodOptions{}
	opts.ProtoReflect().SetUnknown(raw)

	var seen []string
	kept, ok := FilterRaw(opts, 1051, func(v []byte) bool { seen = append(seen, string(v)); return string(v) != "b" })
	if !ok || !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("FilterRaw saw %q, ok %v; want a then b", seen, ok)
	}
	if !slices.Equal([]byte(kept), raw[:other]) {
		t.Errorf("kept % x, want % x (the value b dropped, the others as they were)", kept, raw[:other])
	}

	opts.ProtoReflect().SetUnknown(append(raw[:other:other], 0x80)) // a tag cut short
	if _, ok := FilterRaw(opts, 1051, func([]byte) bool { return true }); ok {
		t.Errorf("unknown fields cut short: ok, want not")
	}
	if _, ok := FilterRaw(nil, 1051, func([]byte) bool { return true }); ok {
		t.Errorf("nil options: ok, want not")
	}
}

func TestRawSitesNameAndPlaceEachElement(t *testing.T) {
	fd := &descriptorpb.FileDescriptorProto{Package: proto.String("p.v1"), Service: []*descriptorpb.ServiceDescriptorProto{
		{Name: proto.String("A"), Method: []*descriptorpb.MethodDescriptorProto{{Name: proto.String("M")}, {Name: proto.String("N")}}},
		{Name: proto.String("B"), Method: []*descriptorpb.MethodDescriptorProto{{Name: proto.String("O")}}},
	}}
	type got struct {
		name  protoreflect.FullName
		level Level
		path  string
	}
	var sites []got
	for s := range RawSites(fd) {
		sites = append(sites, got{s.Name, s.Level, s.Path.String()})
	}
	want := []got{
		{"p.v1", LevelFile, protoreflect.SourcePath{8}.String()},
		{"p.v1.A", LevelService, protoreflect.SourcePath{6, 0, 3}.String()},
		{"p.v1.A.M", LevelMethod, protoreflect.SourcePath{6, 0, 2, 0, 4}.String()},
		{"p.v1.A.N", LevelMethod, protoreflect.SourcePath{6, 0, 2, 1, 4}.String()},
		{"p.v1.B", LevelService, protoreflect.SourcePath{6, 1, 3}.String()},
		{"p.v1.B.O", LevelMethod, protoreflect.SourcePath{6, 1, 2, 0, 4}.String()},
	}
	if !slices.Equal(sites, want) {
		t.Errorf("sites\n%v\nwant\n%v", sites, want)
	}
}
