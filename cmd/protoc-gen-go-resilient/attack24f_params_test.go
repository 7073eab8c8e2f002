// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestAttack24fEmptyBoolParam: protogen splits "envoy=" into the name
// envoy and an empty value, as it splits "envoy" alone, and the plugin
// read both as envoy=true: a buf.gen.yaml's "envoy=" (a value left out,
// or a template variable that expanded to nothing) wrote an Envoy file
// nobody asked for. An empty value is refused now, naming the parameter
// and the values it takes; so is one the parameter does not take, for
// every boolean parameter alike.
func TestAttack24fEmptyBoolParam(t *testing.T) {
	base := filepath.Base(os.Args[0]) + ": "
	for _, tc := range []struct{ params, want string }{
		{"envoy=", "parameter envoy= has no value: envoy takes true or false (envoy alone is envoy=true)"},
		{"docs=", "parameter docs= has no value: docs takes true or false (docs alone is docs=true)"},
		{"service_config=", "parameter service_config= has no value: service_config takes true or false (service_config alone is service_config=true)"},
		{"docs,envoy=", "parameter envoy= has no value: envoy takes true or false (envoy alone is envoy=true)"},
		{"envoy=yes", "parameter envoy=yes: must be true or false"},
		{"docs=on", "parameter docs=on: must be true or false"},
		{"service_config=2", "parameter service_config=2: must be true or false"},
		{"envoy=true,envoy_retries=", `parameter envoy_retries=: must be envoy (Envoy retries, the callers do not) or client (the callers retry, the routes get no retry_policy), got ""`},
	} {
		req := testRequest(t, "export/export.proto")
		req.Parameter = proto.String(req.GetParameter() + "," + tc.params)
		in, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), runMainEnv+"=1")
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil || stderr.String() != base+tc.want+"\n" {
			t.Errorf("%s: got %v, %d bytes of response,\n%q\nwant a failure saying\n%q", tc.params, err, len(out), stderr.String(), base+tc.want+"\n")
		}
	}
}
