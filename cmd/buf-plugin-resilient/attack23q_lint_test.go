// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"buf.build/go/bufplugin/check/checktest"

	"github.com/go-resilient/resilient/internal/rules"
)

// writeTree writes files (path → content) under a temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestAttack23qLintRetypedOption: a copy of resilient.proto whose
// max_attempts is a string. Lint said "resilient.v1.Retry has no field
// max_attempts (number 1)", which it has; it now says the type differs,
// the copy's and the lint plugin's, at the method.
func TestAttack23qLintRetypedOption(t *testing.T) {
	lintRetypedMaxAttempts(t, "string", `"3"`)
}

// lintRetypedMaxAttempts runs lint on a method with retry.max_attempts
// written as value, under a copy of resilient.proto whose max_attempts is
// of type theirs, and wants one annotation naming that type and the
// lint plugin's uint32.
func lintRetypedMaxAttempts(t *testing.T, theirs, value string) {
	t.Helper()
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	const from = "optional uint32 max_attempts = 1 "
	if !strings.Contains(string(src), from) {
		t.Fatalf("the options proto has no %q any more: update the test", from)
	}
	dir := writeTree(t, map[string]string{
		"resilient/v1/resilient.proto": strings.Replace(string(src), from, "optional "+theirs+" max_attempts = 1 ", 1),
		"retyped.proto": `syntax = "proto3";
package retyped.v1;
import "resilient/v1/resilient.proto";
service Shop {
  rpc Get(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, retry: {max_attempts: ` + value + `}};
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
					"resilient.v1.Retry.max_attempts (number 1) is a " + theirs + " in it, where this lint plugin expects a uint32, so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): " +
					"write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and max_attempts as a uint32, " +
					"or install the lint plugin of the version the options proto came from (go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION)"},
		},
	}.Run(t)
}

// TestAttack23qLintCodeListedTwice: lint reports a status code listed
// twice in a list of codes, as the plugin refuses it, at the option, naming
// the method, the option and the code.
func TestAttack23qLintCodeListedTwice(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"twice.proto": `syntax = "proto3";
package twice.v1;
import "resilient/v1/resilient.proto";
service Shop {
  rpc Get(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, retry: {retryable_codes: ["UNAVAILABLE", "UNAVAILABLE"]}};
  }
}
message Req {}
message Resp {}
`,
	})
	checktest.CheckTest{
		Request: &checktest.RequestSpec{
			Files: &checktest.ProtoFileSpec{DirPaths: []string{dir, "../../options"}, FilePaths: []string{"twice.proto"}},
		},
		Spec: spec,
		ExpectedAnnotations: []checktest.ExpectedAnnotation{
			{RuleID: rules.RuleInvalidValue, FileLocation: in("twice.proto", 4, 2, 6, 3),
				Message: `twice.v1.Shop.Get: (resilient.v1.method).retry.retryable_codes[1]: "UNAVAILABLE" is listed twice: remove the repeat`},
		},
	}.Run(t)
}
