// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// attack23eSameWireCopy writes under a temporary directory the options
// proto of this repository with fields retyped to types of the same wire
// type, which parse without an unknown field: Retry's max_attempts a
// sint32 (zigzag: 3 is written as 6), the policy's timeout a message of
// its own {int64 ms = 1}, and retryable_codes a repeated enum (packed: one
// bytes field of varints, read as a string).
func attack23eSameWireCopy(t *testing.T) string {
	return editedOptionsProto(t, [][2]string{
		{"optional uint32 max_attempts = 1 ", "optional sint32 max_attempts = 1 "},
		{"  google.protobuf.Duration timeout = 2;\n", "  Millis timeout = 2;\n"},
		{"repeated string retryable_codes = 5", "repeated Code retryable_codes = 5"},
	}, "\nmessage Millis { int64 ms = 1; }\nenum Code { OK = 0; UNAVAILABLE = 14; }\n")
}

// TestAttack23eSameWireRetypeRefused: 51343aa refuses a copy of the
// options that gives a known field another type, but found it only when
// the value did not parse (an unknown field, or bytes that are no
// Duration). A type of the same wire type parses, as another value: with
// a copy's sint32 max_attempts, max_attempts: 3 generated a client making
// 6 attempts; with a copy's timeout {ms: 5}, a timeout of 5s; a copy's
// repeated enum of codes was refused as the unknown status code "\x0e".
// Each is now refused as the other retypes are, at the option, naming
// both types (the first line), and nothing is written.
func TestAttack23eSameWireRetypeRefused(t *testing.T) {
	head := "the options proto (resilient/v1/resilient.proto) differs from the one of this plugin, protoc-gen-go-resilient v" + version + ": "
	tail := func(field, expects string) string {
		return ", so the value cannot be read: write the options proto of v" + version + " with protoc-gen-go-resilient -options-proto=DIR and " + field + " as " + expects +
			", or use the plugin of the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION)"
	}
	for _, tc := range []struct{ option, want string }{
		{"retry: {max_attempts: 3}", "retyped.proto:8:5: resilienttest.retyped.S.Get: (resilient.v1.method).retry.max_attempts: " + head +
			"resilient.v1.Retry.max_attempts (number 1) is a sint32 in it, where this plugin expects a uint32" + tail("max_attempts", "a uint32")},
		{"timeout: {ms: 5}", "retyped.proto:8:5: resilienttest.retyped.S.Get: (resilient.v1.method).timeout: " + head +
			"resilient.v1.Policy.timeout (number 2) is a resilient.v1.Millis in it, where this plugin expects a google.protobuf.Duration" + tail("timeout", "a google.protobuf.Duration")},
		{"retry: {retryable_codes: [UNAVAILABLE]}", "retyped.proto:8:5: resilienttest.retyped.S.Get: (resilient.v1.method).retry.retryable_codes: " + head +
			"resilient.v1.Retry.retryable_codes (number 5) is a repeated resilient.v1.Code in it, where this plugin expects a repeated string" + tail("retryable_codes", "a repeated string")},
	} {
		dir := attack23eSameWireCopy(t)
		writeFile(t, filepath.Join(dir, "retyped.proto"), []byte(`syntax = "proto3";
package resilienttest.retyped;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/retyped";
service S {
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {idempotent: true, `+tc.option+`};
  }
}
`))
		resp := runPluginParams(t, compileRequest(t, "module="+testModule+",docs=true", []string{dir}, "retyped.proto"))
		// The codes' value is read too (as "\x0e"), and its check says so
		// on a line of its own, after the line that says why.
		if got, _, _ := strings.Cut(resp.GetError(), "\n"); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.option, got, tc.want)
		}
		if len(resp.File) != 0 {
			t.Errorf("%s: wrote %d files despite the refusal", tc.option, len(resp.File))
		}
	}
}
