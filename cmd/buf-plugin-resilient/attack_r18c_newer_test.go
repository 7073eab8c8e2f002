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

// TestAttackR18cLintNewerOptions: a user's copy of resilient.proto newer
// than the lint plugin, with a Policy field (jitter, 99) and a service
// extension the lint plugin's contract lacks, both set. The code generator
// refuses each (its skew check, README "Upgrading"); the README promises
// "every refusal of the plugin is a finding of one of the rules on by
// default". Lint passed both, unchecked: now each is a
// RESILIENT_INVALID_VALUE finding at its service, saying what to do.
func TestAttackR18cLintNewerOptions(t *testing.T) {
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, e := range [][2]string{
		{"message Policy {\n", "extend google.protobuf.ServiceOptions {\n  bool svc_audit = 58233;\n}\n\nmessage Policy {\n  optional bool jitter = 99;\n"},
	} {
		if !strings.Contains(s, e[0]) {
			t.Fatalf("the options proto has no %q any more: update the test", e[0])
		}
		s = strings.Replace(s, e[0], e[1], 1)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("resilient/v1/resilient.proto", s)
	write("newer.proto", `syntax = "proto3";
package newer.v1;
import "resilient/v1/resilient.proto";
service Shop {
  option (resilient.v1.service) = {timeout: {seconds: 1}, jitter: true};
  option (resilient.v1.svc_audit) = true;
  rpc Get(Req) returns (Resp);
}
message Req {}
message Resp {}
`)
	const mend = ", so it cannot be checked (and a protoc-gen-go-resilient of this version refuses it): install the lint plugin of the version the options proto came from (go install github.com/go-resilient/resilient/cmd/buf-plugin-resilient@VERSION), or write the options proto of your protoc-gen-go-resilient with protoc-gen-go-resilient -options-proto=DIR and do not use the field"
	shop := in("newer.proto", 3, 0, 7, 1)
	checktest.CheckTest{
		Request: &checktest.RequestSpec{
			Files: &checktest.ProtoFileSpec{DirPaths: []string{dir}, FilePaths: []string{"newer.proto"}},
		},
		Spec: spec,
		ExpectedAnnotations: []checktest.ExpectedAnnotation{
			{RuleID: rules.RuleInvalidValue, FileLocation: shop,
				Message: "newer.v1.Shop: (resilient.v1.service).jitter: the options proto (resilient/v1/resilient.proto) is newer than this lint plugin, and resilient.v1.Policy has no field jitter (number 99)" + mend},
			{RuleID: rules.RuleInvalidValue, FileLocation: shop,
				Message: "newer.v1.Shop: (resilient.v1.service): the options proto (resilient/v1/resilient.proto) is newer than this lint plugin, and it does not know the option (resilient.v1.svc_audit)" + mend},
		},
	}.Run(t)
}
