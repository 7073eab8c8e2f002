// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	checkv1 "buf.build/gen/go/bufbuild/bufplugin/protocolbuffers/go/buf/plugin/check/v1"
	descriptorv1 "buf.build/gen/go/bufbuild/bufplugin/protocolbuffers/go/buf/plugin/descriptor/v1"
	pluginrpcv1 "buf.build/gen/go/pluginrpc/pluginrpc/protocolbuffers/go/pluginrpc/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/go-resilient/resilient/internal/rules"
	resilientv1 "github.com/go-resilient/resilient/options/resilient/v1"
)

// checkRequestWithMethodOption is a pluginrpc request holding a check
// request of one file, path, whose method S.M has (resilient.v1.method)
// written as the bytes policy, whatever they are.
func checkRequestWithMethodOption(t *testing.T, path string, policy []byte) []byte {
	t.Helper()
	mo := new(descriptorpb.MethodOptions)
	var raw []byte
	raw = protowire.AppendTag(raw, resilientv1.E_Method.TypeDescriptor().Number(), protowire.BytesType)
	raw = protowire.AppendBytes(raw, policy)
	mo.ProtoReflect().SetUnknown(raw)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String(path),
		Package:     proto.String("g.v1"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Msg")}},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("S"), Method: []*descriptorpb.MethodDescriptorProto{{
			Name: proto.String("M"), InputType: proto.String(".g.v1.Msg"), OutputType: proto.String(".g.v1.Msg"), Options: mo,
		}}}},
	}
	check := checkv1.CheckRequest_builder{FileDescriptors: []*descriptorv1.FileDescriptor{
		descriptorv1.FileDescriptor_builder{FileDescriptorProto: fdp}.Build(),
	}}.Build()
	v, err := proto.Marshal(check)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(pluginrpcv1.Request_builder{Value: &anypb.Any{TypeUrl: "type.googleapis.com/buf.plugin.check.v1.CheckRequest", Value: v}}.Build())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttack24hLintUnreadableOptionBytes: readableServer takes out of a
// check request the options whose bytes this plugin's Policy cannot read,
// for lint to report them instead of bufplugin failing with protobuf's
// wire-format error, naming no file. Bytes that no field is to blame for
// (a copy of the options whose (resilient.v1.method) is a string, its
// text read as a Policy; a Policy cut short) were left in: bufplugin then
// failed on them as before. Every such option is taken out and reported
// at its method, naming the option; one whose copy merely adds a field
// (number 99) beside a retyped one is reported for the retyped one; none
// panics.
func TestAttack24hLintUnreadableOptionBytes(t *testing.T) {
	var retypedPlusNew []byte
	retypedPlusNew = protowire.AppendTag(retypedPlusNew, 99, protowire.VarintType)
	retypedPlusNew = protowire.AppendVarint(retypedPlusNew, 7)
	retypedPlusNew = protowire.AppendTag(retypedPlusNew, 2, protowire.BytesType) // timeout, a Duration
	retypedPlusNew = protowire.AppendString(retypedPlusNew, "garbage")
	for _, tc := range []struct {
		name   string
		policy []byte
		want   string // in the finding's message
	}{
		{"a string as the option", []byte("garbage"), "(resilient.v1.method)"},
		{"a policy cut short", []byte{0x12, 0x0a, 0x08, 0x01}, "(resilient.v1.method)"},
		{"a varint cut short", []byte{0x08, 0xff}, "(resilient.v1.method)"},
		{"an added field beside a retyped one", retypedPlusNew, "resilient.v1.Policy.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "g" + strings.ReplaceAll(tc.name, " ", "_") + ".proto"
			out, taken := readableRequest(checkRequestWithMethodOption(t, path, tc.policy))
			req := new(pluginrpcv1.Request)
			if err := proto.Unmarshal(out, req); err != nil {
				t.Fatalf("the request handed on does not parse: %v", err)
			}
			if err := proto.Unmarshal(req.GetValue().GetValue(), new(checkv1.CheckRequest)); err != nil {
				t.Errorf("the check request handed to bufplugin does not parse as it would: %v", err)
			}
			got := taken[path]
			if len(got) != 1 || got[0].level != rules.LevelMethod || got[0].element != "g.v1.S.M" {
				t.Fatalf("recorded %+v; want one option of method g.v1.S.M", got)
			}
			if msg := retypedLintMessage(got[0].option); !strings.Contains(msg, tc.want) {
				t.Errorf("the finding says %q; want it to name %s", msg, tc.want)
			}
		})
	}
}

// bufAndPlugin builds the pinned buf (tools/go.mod) and this lint plugin
// from source into a directory of their own, returned with the repo's
// root: the directory goes first on PATH, where buf finds the plugin as
// the README's buf.yaml names it. It skips under -short or without go.
func bufAndPlugin(t *testing.T) (bin, repo string) {
	t.Helper()
	if testing.Short() {
		t.Skip("building buf is slow; skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	repo, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin = t.TempDir()
	build := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(goBin, append([]string{"build"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", args, err, out)
		}
	}
	build(".", "-o", filepath.Join(bin, "buf-plugin-resilient"), ".")
	build(repo, "-modfile=tools/go.mod", "-o", filepath.Join(bin, "buf"), "github.com/bufbuild/buf/cmd/buf")
	return bin, repo
}
