// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"
	"testing"

	"buf.build/go/bufplugin/check/checktest"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttack23eLintSameWireRetype: a copy of the options whose
// max_attempts is a sint32, a type of the same wire type as the uint32 of
// this lint plugin: the value parses, as another one (3 is read as 6), and
// lint checked 6 and said nothing. It now reports the copy's type and its
// own, as for any retyped field (rules.NewerOptions).
func TestAttack23eLintSameWireRetype(t *testing.T) {
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	const from = "optional uint32 max_attempts = 1 "
	if !strings.Contains(string(src), from) {
		t.Fatalf("the options proto has no %q any more: update the test", from)
	}
	dir := writeTree(t, map[string]string{
		"resilient/v1/resilient.proto": strings.Replace(string(src), from, "optional sint32 max_attempts = 1 ", 1),
		"retyped.proto": `syntax = "proto3";
package retyped.v1;
import "resilient/v1/resilient.proto";
service Shop {
  rpc Get(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, retry: {max_attempts: 3}};
  }
}
message Req {}
message Resp {}
`,
	})
	checktest.CheckTest{
		Request: &checktest.RequestSpec{
			Files: &checktest.ProtoFileSpec{DirPaths: []string{dir}, FilePaths: []string{"retyped.proto"}},
		},
		Spec: spec,
		ExpectedAnnotations: []checktest.ExpectedAnnotation{
			{RuleID: rules.RuleInvalidValue, FileLocation: in("retyped.proto", 4, 2, 6, 3),
				Message: "retyped.v1.Shop.Get: (resilient.v1.method).retry.max_attempts: the options proto (resilient/v1/resilient.proto) differs from the one of this lint plugin: " +
					"resilient.v1.Retry.max_attempts (number 1) is a sint32 in it, where this lint plugin expects a uint32, so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): " +
					"write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and max_attempts as a uint32, " +
					"or install the lint plugin of the version the options proto came from (go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION)"},
		},
	}.Run(t)
}
