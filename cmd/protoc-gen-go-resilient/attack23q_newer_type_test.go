// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

// retypedOptionsProto writes under a temporary directory the options proto
// of this repository with the types of fields changed, as a later (or a
// hand-edited) copy might: Retry's max_attempts a string, CircuitBreaker's
// failure_ratio a string renamed ratio.
func retypedOptionsProto(t *testing.T) string {
	return editedOptionsProto(t, [][2]string{
		{"optional uint32 max_attempts = 1 ", "optional string max_attempts = 1 "},
		{"optional double failure_ratio = 1 [(resilient.v1.default_value) = \"0.5\"];", "optional string ratio = 1;"},
	}, "")
}

// TestAttack23qRetypedOptionFieldRefused: a copy of the options whose
// max_attempts is a string was refused as "resilient.v1.Retry has no field
// max_attempts (number 1)", which it has. The refusal now says the type
// differs, the copy's and the plugin's, at the file and option; nothing is
// written.
func TestAttack23qRetypedOptionFieldRefused(t *testing.T) {
	dir := retypedOptionsProto(t)
	writeFile(t, filepath.Join(dir, "retyped.proto"), []byte(`syntax = "proto3";
package resilienttest.retyped;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/retyped";
service S {
  option (resilient.v1.service) = {circuit_breaker: {ratio: "0.3"}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: "3"}};
  }
}
`))
	req := compileRequest(t, "module="+testModule, []string{dir}, "retyped.proto")
	resp := runPluginParams(t, req)
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files despite the refusal", len(resp.File))
	}
	head := "the options proto (resilient/v1/resilient.proto) differs from the one of this plugin, protoc-gen-go-resilient v" + version + ": "
	tail := func(field, expects string) string {
		return ", so the value cannot be read: write the options proto of v" + version + " with protoc-gen-go-resilient -options-proto=DIR and " + field + " as " + expects +
			", or use the plugin of the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION)"
	}
	want := []string{
		"retyped.proto:7:3: resilienttest.retyped.S: (resilient.v1.service).circuit_breaker.ratio: " + head +
			"resilient.v1.CircuitBreaker.ratio (number 1) is a string in it, where this plugin expects a double named failure_ratio" + tail("failure_ratio", "a double"),
		"retyped.proto:10:5: resilienttest.retyped.S.Get: (resilient.v1.method).retry.max_attempts: " + head +
			"resilient.v1.Retry.max_attempts (number 1) is a string in it, where this plugin expects a uint32" + tail("max_attempts", "a uint32"),
	}
	got := resp.GetError()
	if got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if strings.Contains(got, "has no field") {
		t.Errorf("a field the plugin has is said to be missing:\n%s", got)
	}
}

// TestAttack23qRetypedMessageFieldRefused: a copy of the options whose
// timeout is a string, not a Duration. Its bytes do not parse as a
// Duration, so the whole request did not parse: the plugin answered
// "reading the request from protoc: proto: cannot parse invalid
// wire-format data", naming no file, no element and no option. It now
// refuses the option as for any field of another type, at the file and
// option, naming both types.
func TestAttack23qRetypedMessageFieldRefused(t *testing.T) {
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	const from = "  google.protobuf.Duration timeout = 2;\n"
	if strings.Count(string(src), from) < 1 {
		t.Fatalf("the options proto has no %q any more: update the test", from)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "resilient", "v1", "resilient.proto"), []byte(strings.Replace(string(src), from, "  string timeout = 2;\n", 1)))
	writeFile(t, filepath.Join(dir, "retyped.proto"), []byte(`syntax = "proto3";
package resilienttest.retyped;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/retyped";
service S {
  option (resilient.v1.service) = {timeout: "1s"};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty);
}
`))
	// The request as protoc sends it, the options as bytes: it does not
	// parse with this plugin's options linked in, so it is not read back
	// as compileRequest does, and the plugin runs as protoc runs it.
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{dir}}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), "retyped.proto")
	if err != nil {
		t.Fatal(err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: []string{"retyped.proto"}, Parameter: proto.String("module=" + testModule)}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := range fd.Imports().Len() {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protoutil.ProtoFromFileDescriptor(fd))
	}
	add(compiled[0])
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if proto.Unmarshal(in, new(pluginpb.CodeGeneratorRequest)) == nil {
		t.Fatal("the request parses with this plugin's options: the attack no longer applies")
	}
	resp := runMainBytes(t, in)
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files despite the refusal", len(resp.File))
	}
	want := "retyped.proto:7:3: resilienttest.retyped.S: (resilient.v1.service).timeout: the options proto (resilient/v1/resilient.proto) differs from the one of this plugin, protoc-gen-go-resilient v" + version +
		": resilient.v1.Policy.timeout (number 2) is a string in it, where this plugin expects a google.protobuf.Duration, so the value cannot be read: write the options proto of v" + version +
		" with protoc-gen-go-resilient -options-proto=DIR and timeout as a google.protobuf.Duration, or use the plugin of the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION)"
	if got := resp.GetError(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
