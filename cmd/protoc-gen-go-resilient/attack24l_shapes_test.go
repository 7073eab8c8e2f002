// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// attack24lBuild writes the protos of files into a temporary directory,
// runs protoc-gen-go, protoc-gen-go-grpc and this plugin on gen with
// param, and builds and vets the result in a scratch module; it returns
// the module's directory and this plugin's files.
func attack24lBuild(t *testing.T, param string, files map[string]string, gen ...string) (string, map[string]string) {
	t.Helper()
	goBin, repo := goAndRepo(t, "compiling generated code")
	src := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(src, name), []byte(content))
	}
	req := compileRequest(t, param, []string{src, "../../options"}, gen...)
	out := t.TempDir()
	writeGoAndGRPC(t, goBin, repo, out, req)
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	ours := map[string]string{}
	for _, f := range resp.File {
		ours[f.GetName()] = f.GetContent()
		writeFile(t, filepath.Join(out, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
		for i, line := range strings.Split(f.GetContent(), "\n") {
			if n := len([]rune(strings.ReplaceAll(line, "\t", "    "))); n > 100 {
				t.Errorf("%s:%d: %d columns: %s", f.GetName(), i+1, n, line)
			}
		}
	}
	buildAndVet(t, goBin, out, repo, testModule, " (generated for "+strings.Join(gen, " ")+")")
	return out, ours
}

// attack24lRefused runs the plugin on the protos and returns its error.
func attack24lRefused(t *testing.T, param string, files map[string]string, gen ...string) string {
	t.Helper()
	src := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(src, name), []byte(content))
	}
	req := compileRequest(t, param, []string{src, "../../options"}, gen...)
	return runPlugin(t, req).GetError()
}

// TestAttack24lShapes: several services in a file, the same method name in
// two, a service without options, streams only, imported and nested
// types, and Go names (runtime, policy, context, grpc, …) as the proto and
// Go package and as field names.
func TestAttack24lShapes(t *testing.T) {
	files := map[string]string{
		"other/dep.proto": `syntax = "proto3";
package other.dep;
option go_package = "resilienttest/other/grpc;grpc";
message Thing { string id = 1; }
`,
		"runtime/svc.proto": `syntax = "proto3";
package runtime;
import "resilient/v1/resilient.proto";
import "google/protobuf/empty.proto";
import "other/dep.proto";
option go_package = "resilienttest/runtime;runtime";

// Runtime is named like the runtime package.
service Runtime {
  option (resilient.v1.service) = {timeout: {nanos: 200000000}};
  // Get gets.
  rpc Get(google.protobuf.Empty) returns (other.dep.Thing) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 3}};
  }
  rpc Runtime(Outer.Inner) returns (google.protobuf.Empty);
  rpc Conn(Outer.Inner) returns (google.protobuf.Empty) {
    option deprecated = true;
  }
  rpc Close(Keys) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotency_key: "string" retry: {}};
  }
  rpc ByBytes(Keys) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotency_key: "func" retry: {}};
  }
}

service Options {
  rpc Get(Keys) returns (Keys);
}

service Streams {
  option deprecated = true;
  option (resilient.v1.service) = {timeout: {seconds: 1} circuit_breaker: {}};
  rpc S(Keys) returns (stream Keys);
  rpc C(stream Keys) returns (Keys);
  rpc B(stream Keys) returns (stream Keys);
}

message Outer { message Inner { string context = 1; } }
enum Kind { KIND_UNSPECIFIED = 0; KIND_A = 1; }
message Keys {
  string string = 1;
  Kind type = 2;
  bytes func = 3;
  int64 error = 4;
  string time = 5;
  string grpc = 6;
  string policy = 7;
}
`,
	}
	_, ours := attack24lBuild(t, "module="+testModule, files, "runtime/svc.proto", "other/dep.proto")
	if len(ours) != 1 {
		t.Errorf("the plugin wrote %d files, want 1", len(ours))
	}
}
