// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package rules

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// newerContract is this program's options proto with what a later version
// might add: a field of Policy (jitter, 99), a field of Retry (jitter_off,
// 99), and an extension of ServiceOptions and of MethodOptions.
func newerContract(t *testing.T) *descriptorpb.FileDescriptorProto {
	t.Helper()
	fdp := protodesc.ToFileDescriptorProto(resilientv1.File_resilient_v1_resilient_proto)
	field := func(name string, num int32) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name: proto.String(name), JsonName: proto.String(name), Number: proto.Int32(num),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum(),
		}
	}
	added := 0
	for _, m := range fdp.MessageType {
		switch m.GetName() {
		case "Policy":
			m.Field = append(m.Field, field("jitter", 99))
			added++
		case "Retry":
			m.Field = append(m.Field, field("jitter_off", 99))
			added++
		}
	}
	if added != 2 {
		t.Fatalf("the options proto has no Policy or Retry message any more: update the test")
	}
	for _, x := range [][2]string{{"svc_audit", ".google.protobuf.ServiceOptions"}, {"audit", ".google.protobuf.MethodOptions"}} {
		ext := field(x[0], 58240)
		ext.Extendee, ext.JsonName = proto.String(x[1]), nil
		fdp.Extension = append(fdp.Extension, ext)
	}
	return fdp
}

// newerFile is a file that imports the newer contract and sets, as the
// bytes a buf plugin receives (every (resilient.v1.*) option an unknown
// field of the options message), on the file a Policy with jitter; on its
// service a Policy with a timeout, jitter and a field number 98 that no
// copy of the contract defines, and svc_audit; on its method a retry with
// jitter_off, and audit; and on the method an extension of another
// package with the same number as audit.
func newerFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	files := &protoregistry.Files{}
	for _, dep := range []string{"google/protobuf/descriptor.proto", "google/protobuf/duration.proto"} {
		d, err := protoregistry.GlobalFiles.FindFileByPath(dep)
		if err != nil {
			t.Fatal(err)
		}
		if err := files.RegisterFile(d); err != nil {
			t.Fatal(err)
		}
	}
	contract, err := protodesc.NewFile(newerContract(t), files)
	if err != nil {
		t.Fatalf("the newer contract: %v", err)
	}
	if err := files.RegisterFile(contract); err != nil {
		t.Fatal(err)
	}
	other, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("other/v1/other.proto"), Package: proto.String("other.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/descriptor.proto"},
		Extension: []*descriptorpb.FieldDescriptorProto{{
			Name: proto.String("audit"), Number: proto.Int32(58241),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: descriptorpb.FieldDescriptorProto_TYPE_BOOL.Enum(),
			Extendee: proto.String(".google.protobuf.MethodOptions"),
		}},
	}, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.RegisterFile(other); err != nil {
		t.Fatal(err)
	}

	// policy is the bytes of p followed by unknown bool fields of msg.
	policy := func(p *Policy, unknown ...protowire.Number) []byte {
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, num := range unknown {
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
		}
		return b
	}
	option := func(b []byte, num protowire.Number, value []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), value)
	}
	flag := func(b []byte, num protowire.Number) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
	}
	withUnknown := func(m proto.Message, b []byte) proto.Message {
		m.ProtoReflect().SetUnknown(b)
		return m
	}
	const ext = 58231 // (resilient.v1.file), (resilient.v1.service), (resilient.v1.method)
	retry, err := proto.Marshal(&resilientv1.Retry{MaxAttempts: proto.Uint32(2)})
	if err != nil {
		t.Fatal(err)
	}
	retry = flag(retry, 99)
	retryField := (&Policy{}).ProtoReflect().Descriptor().Fields().ByName("retry").Number()
	methodPolicy := option(nil, retryField, retry)

	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("newer.proto"), Package: proto.String("newer.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"resilient/v1/resilient.proto", "other/v1/other.proto", "google/protobuf/duration.proto"},
		Options:    withUnknown(&descriptorpb.FileOptions{}, option(nil, ext, policy(&Policy{}, 99))).(*descriptorpb.FileOptions),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Shop"),
			Options: withUnknown(&descriptorpb.ServiceOptions{},
				flag(option(nil, ext, policy(&Policy{Timeout: durationpb.New(1e9)}, 99, 98)), 58240)).(*descriptorpb.ServiceOptions),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("Get"), InputType: proto.String(".google.protobuf.Duration"), OutputType: proto.String(".google.protobuf.Duration"),
				Options: withUnknown(&descriptorpb.MethodOptions{},
					flag(flag(option(nil, ext, methodPolicy), 58240), 58241)).(*descriptorpb.MethodOptions),
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, files)
	if err != nil {
		t.Fatalf("the newer file: %v", err)
	}
	return fd
}

// TestNewerOptions checks that every field and extension of a newer
// contract that a file sets is found, at every level, with the element,
// level and path it is written at, and nothing else: not the fields this
// program knows, nor an extension of another package.
func TestNewerOptions(t *testing.T) {
	fd := newerFile(t)
	var got []string
	NewerOptions(fd, func(at protoreflect.Descriptor, n NewerOption) {
		x := "-"
		if n.Extension != nil {
			x = string(n.Extension.FullName())
		}
		got = append(got, fmt.Sprintf("%s %s %q %s: %s", at.FullName(), n.Level.Option(), n.Path, x, n.What))
	})
	want := []string{
		`newer.v1 (resilient.v1.file) "jitter" -: resilient.v1.Policy has no field jitter (number 99)`,
		`newer.v1.Shop (resilient.v1.service) "jitter" -: resilient.v1.Policy has no field jitter (number 99)`,
		`newer.v1.Shop (resilient.v1.service) "#98" -: resilient.v1.Policy has no field #98 (number 98)`,
		`newer.v1.Shop (resilient.v1.service) "" resilient.v1.svc_audit: it does not know the option (resilient.v1.svc_audit)`,
		`newer.v1.Shop.Get (resilient.v1.method) "retry.jitter_off" -: resilient.v1.Retry has no field jitter_off (number 99)`,
		`newer.v1.Shop.Get (resilient.v1.method) "" resilient.v1.audit: it does not know the option (resilient.v1.audit)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPolicyOfUnknownBytes checks that PolicyOf reads a policy that the
// options hold as unknown bytes, as a buf plugin receives them, and the
// same policy CheckFile checks: the service's timeout of 1s is read, and
// its retry of a method too.
func TestPolicyOfUnknownBytes(t *testing.T) {
	fd := newerFile(t)
	s := fd.Services().Get(0)
	if got := PolicyOf(s).GetTimeout().AsDuration(); got != 1e9 {
		t.Errorf("the service's timeout is %v, want 1s", got)
	}
	if got := PolicyOf(s.Methods().Get(0)).GetRetry().GetMaxAttempts(); got != 2 {
		t.Errorf("the method's max_attempts is %d, want 2", got)
	}
	if p := PolicyOf(s.Methods().Get(0).Input()); p != nil {
		t.Errorf("a message has a policy: %v", p)
	}
}
