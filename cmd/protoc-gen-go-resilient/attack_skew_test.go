// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newerOptionsWith writes the repository's options proto with edits, as
// a later version might have it, and returns its directory.
func newerOptionsWith(t *testing.T, edits ...[2]string) string {
	t.Helper()
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, e := range edits {
		if !strings.Contains(s, e[0]) {
			t.Fatalf("the options proto has no %q any more: update the test", e[0])
		}
		s = strings.Replace(s, e[0], e[1], 1)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "resilient", "v1", "resilient.proto"), []byte(s))
	return dir
}

// TestAttackSkewNewerValues: what a newer options proto can add beyond a
// field: a value of an enum, a whole new group, a field written field by
// field, an extension of the service's and the file's options. Each is
// refused at its place, never ignored, and nothing is written.
func TestAttackSkewNewerValues(t *testing.T) {
	dir := newerOptionsWith(t,
		[2]string{"  PRIORITY_HIGH = 3;\n", "  PRIORITY_HIGH = 3;\n  PRIORITY_URGENT = 7;\n"},
		[2]string{"message Policy {\n", "message Adaptive {\n  optional uint32 limit = 1;\n}\n\nmessage Policy {\n  optional Adaptive adaptive = 98;\n  optional uint32 brand_new = 99;\n"},
		[2]string{"message Policy {\n", "extend google.protobuf.ServiceOptions {\n  bool svc_audit = 58233;\n}\n\nextend google.protobuf.FileOptions {\n  bool file_audit = 58234;\n}\n\nextend google.protobuf.MethodOptions {\n  bool m_audit = 58235;\n}\n\nmessage Policy {\n"},
	)
	writeFile(t, filepath.Join(dir, "skewv.proto"), []byte(`syntax = "proto3";
package resilienttest.skewv;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/skewv";
option (resilient.v1.file_audit) = true;
service S {
  option (resilient.v1.svc_audit) = true;
  rpc Urgent(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {priority: PRIORITY_URGENT};
  }
  rpc Adapt(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method) = {adaptive: {limit: 5}};
  }
  rpc FieldByField(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.method).brand_new = 3;
  }
}
`))
	req := compileRequest(t, "module="+testModule+",service_config=true,envoy=true,docs=true", []string{dir}, "skewv.proto")
	resp := runPluginParams(t, req)
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files despite a newer options proto", len(resp.File))
	}
	got := resp.GetError()
	for _, want := range []string{
		"skewv.proto:6:1: resilienttest.skewv: (resilient.v1.file): the options proto (resilient/v1/resilient.proto) is newer than this plugin",
		"it does not know the option (resilient.v1.file_audit)",
		"skewv.proto:8:3: resilienttest.skewv.S: (resilient.v1.service): the options proto",
		"it does not know the option (resilient.v1.svc_audit)",
		// An enum value the plugin does not know is refused as unknown
		// (it does not say why: a newer options proto).
		"skewv.proto:10:5: resilienttest.skewv.S.Urgent: (resilient.v1.method).priority: unknown value 7, perhaps of a newer version of the options than this program knows: write PRIORITY_LOW, PRIORITY_NORMAL, PRIORITY_HIGH or PRIORITY_CRITICAL, or upgrade this program to the version of your copy of resilient.proto",
		"skewv.proto:13:5: resilienttest.skewv.S.Adapt: (resilient.v1.method).adaptive: the options proto",
		"resilient.v1.Policy has no field adaptive (number 98)",
		"skewv.proto:16:5: resilienttest.skewv.S.FieldByField: (resilient.v1.method).brand_new: the options proto",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal lacks %q; got:\n%s", want, got)
		}
	}
	// An option set beside others is found at its own statement, not at
	// the first option of the element.
	writeFile(t, filepath.Join(dir, "skewpos.proto"), []byte(`syntax = "proto3";
package resilienttest.skewpos;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/skewpos";
service S {
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option deprecated = true;
    option (resilient.v1.m_audit) = true;
  }
}
`))
	resp = runPluginParams(t, compileRequest(t, "module="+testModule, []string{dir}, "skewpos.proto"))
	if want := "skewpos.proto:10:5: resilienttest.skewpos.S.Get: (resilient.v1.method): the options proto (resilient/v1/resilient.proto) is newer than this plugin"; !strings.HasPrefix(resp.GetError(), want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", resp.GetError(), want)
	}
}
