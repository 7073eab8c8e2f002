package main

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttack19NewerRepeatedFieldIsOneRefusal: a newer options proto adds
// a repeated field (a list of strings, a list of messages) and the file
// writes it with three values. Each value is its own unknown field on the
// wire; the value written is one, and the plugin refuses it once, as lint
// reports it once (rules.NewerOptions is their one walk).
func TestAttack19NewerRepeatedFieldIsOneRefusal(t *testing.T) {
	dir := newerOptionsWith(t,
		[2]string{"message Policy {\n", "message Tag {\n  optional string name = 1;\n}\n\nmessage Policy {\n  repeated string labels = 97;\n  repeated Tag tags = 98;\n"},
	)
	writeFile(t, filepath.Join(dir, "rep.proto"), []byte(`syntax = "proto3";
package resilienttest.rep;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/rep";
service S {
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {labels: ["a", "b", "c"], tags: [{name: "x"}, {name: "y"}, {name: "z"}]};
  }
}
`))
	req := compileRequest(t, "module="+testModule, []string{dir}, "rep.proto")
	got := runPluginParams(t, req).GetError()
	for _, field := range []string{"labels", "tags"} {
		if n := strings.Count(got, "(resilient.v1.method)."+field+": "); n != 1 {
			t.Errorf("the newer field %s refused %d times; want once:\n%s", field, n, got)
		}
	}
	found := map[string]int{}
	var flags []string
	rules.NewerOptions(fileOf(t, req, "rep.proto"), func(at protoreflect.Descriptor, n rules.NewerOption) {
		found[n.Path]++
		flags = append(flags, string(at.FullName())+" "+n.Path)
	})
	if found["labels"] != 1 || found["tags"] != 1 {
		t.Errorf("NewerOptions found %v; want labels and tags once each", flags)
	}
}

// fileOf is the descriptor of the file named name that req asks to
// generate.
func fileOf(t *testing.T, req interface {
	GetProtoFile() []*descriptorpb.FileDescriptorProto
}, name string) protoreflect.FileDescriptor {
	t.Helper()
	files, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: req.GetProtoFile()})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := files.FindFileByPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}
