// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"buf.build/go/bufplugin/check/checktest"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttack25gFileOptionFieldByField: a file's option written field by
// field (option (resilient.v1.file).circuit_breaker.failure_ratio = 2;),
// wrong for every service, was reported by lint at the file alone (line
// 0), its source info having no location for the whole option; the code
// generator pointed at the statement. Lint now reports each finding at
// the statement of the field at fault, and one written as a message at
// that option statement, as before.
func TestAttack25gFileOptionFieldByField(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"f.proto": `syntax = "proto3";
package place.v1;
import "resilient/v1/resilient.proto";
option (resilient.v1.file).timeout = {seconds: 5};
option (resilient.v1.file).circuit_breaker.failure_ratio = 2;
option (resilient.v1.file).retry.retryable_codes = "UNAVAILABLE";
option (resilient.v1.file).retry.retryable_codes = "UNAVAILABLE";
service A { rpc Get(Req) returns (Resp); }
message Req {}
message Resp {}
`,
		"m.proto": `syntax = "proto3";
package place.v2;
import "resilient/v1/resilient.proto";
option (resilient.v1.file) = {
  circuit_breaker: {failure_ratio: 2}
};
service A { rpc Get(Req) returns (Resp); }
message Req {}
message Resp {}
`,
	})
	run := func(file string, want ...checktest.ExpectedAnnotation) {
		t.Helper()
		checktest.CheckTest{
			Request: &checktest.RequestSpec{
				Files:   &checktest.ProtoFileSpec{DirPaths: []string{dir, "../../options"}, FilePaths: []string{file}},
				RuleIDs: []string{rules.RuleInvalidValue},
			},
			Spec:                spec,
			ExpectedAnnotations: want,
		}.Run(t)
	}
	run("f.proto",
		checktest.ExpectedAnnotation{
			RuleID:       rules.RuleInvalidValue,
			Message:      "place.v1: (resilient.v1.file).circuit_breaker.failure_ratio: must be in (0, 1], got 2; remove it for the default 0.5",
			FileLocation: &checktest.ExpectedFileLocation{FileName: "f.proto", StartLine: 4, StartColumn: 0, EndLine: 4, EndColumn: 61},
		},
		checktest.ExpectedAnnotation{
			RuleID:       rules.RuleInvalidValue,
			Message:      `place.v1: (resilient.v1.file).retry.retryable_codes[1]: "UNAVAILABLE" is listed twice: remove the repeat`,
			FileLocation: &checktest.ExpectedFileLocation{FileName: "f.proto", StartLine: 6, StartColumn: 0, EndLine: 6, EndColumn: 65},
		},
	)
	run("m.proto", checktest.ExpectedAnnotation{
		RuleID:       rules.RuleInvalidValue,
		Message:      "place.v2: (resilient.v1.file).circuit_breaker.failure_ratio: must be in (0, 1], got 2; remove it for the default 0.5",
		FileLocation: &checktest.ExpectedFileLocation{FileName: "m.proto", StartLine: 3, StartColumn: 0, EndLine: 5, EndColumn: 2},
	})
}
