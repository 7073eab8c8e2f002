// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttack23pOneofAndExtensionNames: protoc-gen-go declares a type for
// each field of a oneof (M_BResilientPolicy for M's oneof field
// b_resilient_policy) and a variable for each extension
// (E_XResilientPolicy for x_resilient_policy): names of the Go package the
// resilient client declares too, for a service M_B or E_X. Before, the
// plugin wrote a client that did not compile ("M_BResilientPolicy
// redeclared in this block"); the README promises it refuses at the
// service, naming who else declares the name. A proto3 optional field,
// in a oneof of its own that protoc-gen-go declares no type for, is no
// collision.
func TestAttack23pOneofAndExtensionNames(t *testing.T) {
	const src = `syntax = "proto3";
package r23p.names;
import "google/protobuf/descriptor.proto";
option go_package = "resilienttest/r23p/names";
service M_B { rpc Get(M) returns (M); }
service E_X { rpc Get(M) returns (M); }
service N_ { rpc Get(N) returns (N); }
message M { oneof o { string b_resilient_policy = 1; } }
message N { optional string resilient_policy = 1; }
extend google.protobuf.MethodOptions { string x_resilient_policy = 50001; }
`
	files, got := attackProto(t, "names.proto", src, "")
	if len(files) != 0 {
		t.Errorf("wrote %d files for names that collide", len(files))
	}
	want := "names.proto:5:1: r23p.names.M_B: its resilient client declares M_BResilientPolicy, which protoc-gen-go for oneof field r23p.names.M.b_resilient_policy (names.proto) declares too, in Go package \"resilienttest/r23p/names\": the Go would not compile; rename one of the two in the .proto\n" +
		"names.proto:6:1: r23p.names.E_X: its resilient client declares E_XResilientPolicy, which protoc-gen-go for extension r23p.names.x_resilient_policy (names.proto) declares too, in Go package \"resilienttest/r23p/names\": the Go would not compile; rename one of the two in the .proto"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// Without the two, the same file is generated and compiles: N_'s
	// client beside N's optional field.
	files, got = attackProto(t, "names.proto", `syntax = "proto3";
package r23p.names;
option go_package = "resilienttest/r23p/names";
service N_ { rpc Get(N) returns (N); }
message N { optional string resilient_policy = 1; oneof o { string other = 2; } }
`, "")
	if got != "" || files["r23p/names/names_resilient.pb.go"] == "" {
		t.Errorf("refused a file with no collision: %q, files %v", got, keys(files))
	}
}

// TestAttack23pLintLeavesGoNamesToTheGenerator: the same two files, a
// service S in one and a service SResilient in the other, collide in Go
// (SResilientClient twice) when they are generated into one Go package,
// and do not when protoc's M parameters (or buf's managed mode) put them
// in two: the collision is a fact of the generation, not of the .proto,
// and lint, which sees the .proto alone, finds nothing in either case,
// as the README says.
func TestAttack23pLintLeavesGoNamesToTheGenerator(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/a.proto", []byte("syntax = \"proto3\";\npackage r23p.lint;\nservice S { rpc Get(M) returns (M); }\nmessage M {}\n"))
	writeFile(t, dir+"/b.proto", []byte("syntax = \"proto3\";\npackage r23p.lint;\nimport \"a.proto\";\nservice SResilient { rpc Get(M) returns (M); }\n"))
	for _, tc := range []struct {
		name, params string
		refused      bool
	}{
		{"one Go package", "Ma.proto=resilienttest/r23p/lint;lint,Mb.proto=resilienttest/r23p/lint;lint", true},
		{"two Go packages", "Ma.proto=resilienttest/r23p/lint;lint,Mb.proto=resilienttest/r23p/lintb;lintb", false},
	} {
		req := compileRequest(t, "module="+testModule+","+tc.params, []string{dir, "../../options"}, "a.proto", "b.proto")
		got := runPluginParams(t, req).GetError()
		if refused := strings.Contains(got, "its resilient client declares SResilientClient"); refused != tc.refused {
			t.Errorf("%s: the plugin refused %v, want %v: %q", tc.name, refused, tc.refused, got)
		}
		lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
			if fi.Rule != rules.RuleNoTimeout {
				t.Errorf("%s: lint finds %s at %s: %s", tc.name, fi.Rule, d.FullName(), fi.Message)
			}
		})
	}
}
