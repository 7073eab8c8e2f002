// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// retypedOptionsProto writes under a temporary directory the options proto
// of this repository with the types of fields changed, as a later (or a
// hand-edited) copy might: Retry's max_attempts a string, CircuitBreaker's
// failure_ratio a string renamed ratio.
func retypedOptionsProto(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, edit := range [][2]string{
		{"optional uint32 max_attempts = 1 ", "optional string max_attempts = 1 "},
		{"optional double failure_ratio = 1 [(resilient.v1.default_value) = \"0.5\"];", "optional string ratio = 1;"},
	} {
		if !strings.Contains(s, edit[0]) {
			t.Fatalf("the options proto has no %q any more: update the test", edit[0])
		}
		s = strings.Replace(s, edit[0], edit[1], 1)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "resilient", "v1", "resilient.proto"), []byte(s))
	return dir
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
