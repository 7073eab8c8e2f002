// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// newerOptionsProto writes under a temporary directory the options proto
// of this repository with what a later version might add: a field of
// Policy, a field of Retry, and an extension of MethodOptions.
func newerOptionsProto(t *testing.T) string {
	return editedOptionsProto(t, [][2]string{
		{"message Policy {\n", "message Policy {\n  optional uint32 brand_new = 99;\n"},
		{"message Retry {\n", "message Retry {\n  optional bool jitter_off = 99;\n"},
		{"message Policy {\n", "extend google.protobuf.MethodOptions {\n  bool audit = 58232;\n}\n\nmessage Policy {\n"},
	}, "")
}

// editedOptionsProto writes under a temporary directory the options proto
// of this repository with each edit's first text replaced by its second
// (once, failing when the text is gone) and more appended, as a later or
// hand-edited copy of the contract would read, and returns the directory
// to import it from.
func editedOptionsProto(t *testing.T, edits [][2]string, more string) string {
	t.Helper()
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, edit := range edits {
		if !strings.Contains(s, edit[0]) {
			t.Fatalf("the options proto has no %q any more: update the test", edit[0])
		}
		s = strings.Replace(s, edit[0], edit[1], 1)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "resilient", "v1", "resilient.proto"), []byte(s+more))
	return dir
}

const skewProto = `syntax = "proto3";
package resilienttest.skew;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/skew";
option (resilient.v1.file) = {brand_new: 1};
service S {
  option (resilient.v1.service) = {timeout: {seconds: 1}, brand_new: 2};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 2, jitter_off: true}};
  }
  rpc Audited(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option (resilient.v1.audit) = true;
  }
}
`

// TestOptionsNewerThanPluginRefused checks that every field of a newer
// options proto that a file sets is refused, at the option, with the
// plugin's version, and that nothing is written.
func TestOptionsNewerThanPluginRefused(t *testing.T) {
	dir := newerOptionsProto(t)
	writeFile(t, filepath.Join(dir, "skew.proto"), []byte(skewProto))
	req := compileRequest(t, "module="+testModule, []string{dir}, "skew.proto")
	resp := runPluginParams(t, req)
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files despite the refusal", len(resp.File))
	}
	tail := "so it would be ignored: upgrade the plugin to the version the options proto came from (go get -tool github.com/go-resilient/resilient/cmd/protoc-gen-go-resilient@VERSION), or write the options proto of v" + version + " with protoc-gen-go-resilient -options-proto=DIR and do not use the field"
	head := "the options proto (resilient/v1/resilient.proto) is newer than this plugin, protoc-gen-go-resilient v" + version + ", and "
	want := []string{
		"skew.proto:6:1: resilienttest.skew: (resilient.v1.file).brand_new: " + head + "resilient.v1.Policy has no field brand_new (number 99), " + tail,
		"skew.proto:8:3: resilienttest.skew.S: (resilient.v1.service).brand_new: " + head + "resilient.v1.Policy has no field brand_new (number 99), " + tail,
		"skew.proto:11:5: resilienttest.skew.S.Get: (resilient.v1.method).retry.jitter_off: " + head + "resilient.v1.Retry has no field jitter_off (number 99), " + tail,
		"skew.proto:14:5: resilienttest.skew.S.Audited: (resilient.v1.method): " + head + "it does not know the option (resilient.v1.audit), " + tail,
	}
	got := strings.Split(resp.GetError(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOptionsOlderThanPluginAccepted checks that a file importing an
// older options proto (testdata/skew/older: the contract before hedging,
// cache and the server side) is generated as with the current one.
func TestOptionsOlderThanPluginAccepted(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "older.proto"), []byte(`syntax = "proto3";
package resilienttest.older;
import "google/protobuf/empty.proto";
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/older";
service S {
  option (resilient.v1.service) = {timeout: {nanos: 300000000}, bulkhead: {permits: 4}};
  rpc Get(google.protobuf.Empty) returns (google.protobuf.Empty) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {retry: {max_attempts: 4}};
  }
}
`))
	generated := func(optionsDir string) string {
		req := compileRequest(t, "module="+testModule, []string{dir, optionsDir}, "older.proto")
		resp := runPluginParams(t, req)
		if resp.Error != nil || len(resp.File) != 1 {
			t.Fatalf("with %s: error %q, %d files", optionsDir, resp.GetError(), len(resp.File))
		}
		return resp.File[0].GetContent()
	}
	older, current := generated("testdata/skew/older"), generated("../../options")
	if older != current {
		t.Errorf("the older options proto gave another client:\n%s\nthe current one:\n%s", older, current)
	}
	if !strings.Contains(older, "MaxAttempts:") || !strings.Contains(older, "Permits:") {
		t.Errorf("the client lacks the annotated retry or bulkhead:\n%s", older)
	}
}

// TestREADMENewerOptions checks the refusal README.md quotes: its complete
// example with jitter: true on the service, from an options proto whose
// Policy has a field jitter (number 99).
func TestREADMENewerOptions(t *testing.T) {
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	newer := strings.Replace(string(src), "message Policy {\n", "message Policy {\n  optional bool jitter = 99;\n", 1)
	writeFile(t, filepath.Join(dir, "third_party", "resilient", "v1", "resilient.proto"), []byte(newer))
	example := readmeBlockTagged(t, "proto proto/shop/inventory/v1/inventory.proto").body
	const old = "retry_budget: {ratio: 0.1}\n"
	if strings.Count(example, old) != 1 {
		t.Fatalf("the README's example has no single %q any more: update the test", old)
	}
	writeFile(t, filepath.Join(dir, "proto", "shop", "inventory", "v1", "inventory.proto"), []byte(strings.Replace(example, old, old+"    jitter: true\n", 1)))
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc is not installed (apt-get install protobuf-compiler)")
		}
		t.Skip("protoc is not installed")
	}
	// protoc runs this test binary as the plugin (TestMain).
	cmd := exec.Command(protoc, "-Iproto", "-Ithird_party", "--plugin=protoc-gen-go-resilient="+os.Args[0], "--go-resilient_out="+t.TempDir(), "proto/shop/inventory/v1/inventory.proto")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("protoc accepted an option of a newer options proto: %s", out)
	}
	if got, want := strings.TrimSpace(string(out)), strings.TrimSpace(readmeBlockTagged(t, "text newer").body); got != want {
		t.Errorf("protoc prints\n%s\nthe README says\n%s", got, want)
	}
}
