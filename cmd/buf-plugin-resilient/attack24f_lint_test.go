// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bufLintTree runs the pinned buf lint, with this lint plugin built from
// source on PATH, over the files (path → content) of a workspace with
// bufYAML, and returns its stdout (--error-format=json) and stderr.
func bufLintTree(t *testing.T, files map[string]string, bufYAML string) (string, string) {
	t.Helper()
	bin, _ := bufAndPlugin(t)
	files["buf.yaml"] = bufYAML
	ws := writeTree(t, files)
	cmd := exec.Command(filepath.Join(bin, "buf"), "lint", "--error-format=json")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "BUF_CACHE_DIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // a finding fails buf lint; the output says what
	return stdout.String(), stderr.String()
}

// TestAttack24fLintRetypedMessageField: a copy of resilient.proto whose
// Policy.timeout is a string, and a service that writes timeout: "1s".
// The code generator refuses it at the option, naming the field and both
// types (TestAttack23qRetypedMessageFieldRefused); buf lint failed
// inside bufplugin, which parses the request with this plugin's options
// linked in, with protobuf's "cannot parse invalid wire-format data",
// naming no file, and checked nothing. It reports the option now as
// RESILIENT_INVALID_VALUE at the service, saying what the generator says
// of itself, and still checks the rest (the method's retries of a write).
func TestAttack24fLintRetypedMessageField(t *testing.T) {
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	const from = "  google.protobuf.Duration timeout = 2;\n"
	if !strings.Contains(string(src), from) {
		t.Fatalf("the options proto has no %q any more: update the test", from)
	}
	out, stderr := bufLintTree(t, map[string]string{
		"third_party/resilient/v1/resilient.proto": strings.Replace(string(src), from, "  string timeout = 2;\n", 1),
		"proto/shop/v1/retyped.proto": `syntax = "proto3";
package shop.v1;
import "resilient/v1/resilient.proto";
option (resilient.v1.file) = {timeout: "3s"};
service Shop {
  option (resilient.v1.service) = {timeout: "1s"};
  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {timeout: "2s"};
  }
  rpc Pay(Req) returns (Resp) {
    option (resilient.v1.method) = {retry: {max_attempts: 3}};
  }
}
message Req {}
message Resp {}
`,
	}, "version: v2\nmodules:\n  - path: proto\n  - path: third_party\nplugins:\n  - plugin: buf-plugin-resilient\nlint:\n  use: [RESILIENT]\n  except: [RESILIENT_NO_TIMEOUT]\n")
	if strings.Contains(stderr, "wire-format") || strings.Contains(stderr, "panic") {
		t.Fatalf("buf lint failed in the plugin instead of reporting the option:\n%s", stderr)
	}
	for _, want := range []string{
		`"path":"proto/shop/v1/retyped.proto","start_line":4,`,
		`"path":"proto/shop/v1/retyped.proto","start_line":5,`,
		`"path":"proto/shop/v1/retyped.proto","start_line":7,`,
		`"type":"RESILIENT_INVALID_VALUE","message":"shop.v1: (resilient.v1.file).timeout: the options proto (resilient/v1/resilient.proto) differs from the one of this lint plugin: resilient.v1.Policy.timeout (number 2) is a string in it, where this lint plugin expects a google.protobuf.Duration`,
		`"type":"RESILIENT_INVALID_VALUE","message":"shop.v1.Shop: (resilient.v1.service).timeout: the options proto (resilient/v1/resilient.proto) differs from the one of this lint plugin: resilient.v1.Policy.timeout (number 2) is a string in it, where this lint plugin expects a google.protobuf.Duration`,
		`"type":"RESILIENT_INVALID_VALUE","message":"shop.v1.Shop.Get: (resilient.v1.method).timeout: the options proto (resilient/v1/resilient.proto) differs from the one of this lint plugin: resilient.v1.Policy.timeout (number 2) is a string in it, where this lint plugin expects a google.protobuf.Duration`,
		`"path":"proto/shop/v1/retyped.proto","start_line":11,`,
		`"type":"RESILIENT_RETRY_NOT_IDEMPOTENT"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("buf lint printed no %s in\n%s\nstderr:\n%s", want, out, stderr)
		}
	}
}
