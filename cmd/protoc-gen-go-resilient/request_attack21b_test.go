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

	"google.golang.org/protobuf/proto"
)

// TestAttack21bOptionStringNotUTF8: protoc passes a string option's byte
// escape ("\xff") through as it is (buf's compiler refuses it), and a
// string of resilient.proto must be valid UTF-8. The plugin used to fail
// reading protoc's request, before any check, with protobuf's "string
// field contains invalid UTF-8" on stderr: no file, no line, no element,
// no option. It must answer, as for any refusal, with an error naming the
// file and line, the element and the option, at each level the contract
// has a string: a method's, a service's, the file's, a field's default.
func TestAttack21bOptionStringNotUTF8(t *testing.T) {
	const src = `syntax = "proto3";
package a21b;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/a21b;a21b";
option (resilient.v1.file) = {retry: {retryable_codes: ["UNAVAILABLE", "FILEQZQZ"]}};
message Req {
  string id = 1 [(resilient.v1.default_value) = "FIELDQZQZ"];
  message Inner { string note = 1 [(resilient.v1.default_value) = "NESTEDQZQZ"]; }
}
message Resp {}
service Svc {
  option (resilient.v1.service) = {circuit_breaker: {failure_codes: ["SERVICEQZQZ"]}};
  rpc Get(Req) returns (Resp) {
    option idempotency_level = IDEMPOTENT;
    option (resilient.v1.method) = {
      timeout: {nanos: 300000000}
      retry: {max_attempts: 3 retryable_codes: ["UNAVAILABLE", "METHODQZQZ"]}
    };
  }
  rpc Put(Req) returns (Resp) {
    option (resilient.v1.method).idempotency_key = "idQZQZ";
  }
}
`
	for _, tc := range []struct {
		marker string
		want   string
	}{
		{"FILEQZQZ", `a21b.proto:5:1: a21b: (resilient.v1.file).retry.retryable_codes[1]: is not valid UTF-8 ("FILEQZQ\xff")`},
		{"FIELDQZQZ", `a21b.proto:7:18: a21b.Req.id: (resilient.v1.default_value): is not valid UTF-8 ("FIELDQZQ\xff")`},
		{"NESTEDQZQZ", `a21b.proto:8:36: a21b.Req.Inner.note: (resilient.v1.default_value): is not valid UTF-8 ("NESTEDQZQ\xff")`},
		{"SERVICEQZQZ", `a21b.proto:12:3: a21b.Svc: (resilient.v1.service).circuit_breaker.failure_codes[0]: is not valid UTF-8 ("SERVICEQZQ\xff")`},
		{"METHODQZQZ", `a21b.proto:15:5: a21b.Svc.Get: (resilient.v1.method).retry.retryable_codes[1]: is not valid UTF-8 ("METHODQZQ\xff")`},
		{"idQZQZ", `a21b.proto:21:5: a21b.Svc.Put: (resilient.v1.method).idempotency_key: is not valid UTF-8 ("idQZQ\xff")`},
	} {
		t.Run(tc.marker, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a21b.proto"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			in, err := proto.Marshal(compileRequest(t, "module="+testModule, []string{dir, "../../options"}, "a21b.proto"))
			if err != nil {
				t.Fatal(err)
			}
			// The same length, so that no length before it changes.
			bad := []byte(tc.marker[:len(tc.marker)-1] + "\xff")
			if bytes.Count(in, []byte(tc.marker)) != 1 {
				t.Fatalf("the marker %s is not once in the request", tc.marker)
			}
			in = bytes.Replace(in, []byte(tc.marker), bad, 1)

			resp := runMainBytes(t, in)
			if !strings.Contains(resp.GetError(), tc.want) {
				t.Errorf("the refusal is\n%q\nwant it to contain\n%q", resp.GetError(), tc.want)
			}
			if len(resp.GetFile()) != 0 {
				t.Errorf("%d files written beside the refusal, want none", len(resp.GetFile()))
			}
		})
	}
}

// TestAttack21bMainStillRefusesStrayArguments: run still refuses an
// argument, as protogen does, and a request that does not parse for
// another reason is still an error on stderr, not a refusal.
func TestAttack21bMainStillRefusesStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		in   []byte
		want string
	}{
		{"an argument", []string{"stray"}, nil, `unknown argument "stray"`},
		{"a request that is not one", nil, []byte{0xff, 0xff, 0xff}, "reading the request from protoc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			cmd.Stdin = bytes.NewReader(tc.in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatal("the plugin succeeded")
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr is %q, want it to say %q", stderr.String(), tc.want)
			}
		})
	}
}
