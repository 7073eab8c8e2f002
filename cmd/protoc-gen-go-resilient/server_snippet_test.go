// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"
	"testing"
)

// TestServerPolicyCommentInstallsLikeTheREADME: the comment generated above
// each XxxServerPolicy shows how to build the gRPC server, and so does the
// README's Server side snippet: both must give grpc.NewServer the same
// options (runtime.ServerOptions before the Guard's, without which the
// server closes the connections of clients dialled with
// runtime.DialOptions whose calls stay silent, too_many_pings).
func TestServerPolicyCommentInstallsLikeTheREADME(t *testing.T) {
	var want string
	for _, b := range readmeBlocks(t) {
		if b.section != "## Server side" || b.lang() != "go" {
			continue
		}
		for _, line := range strings.Split(b.body, "\n") {
			if strings.Contains(line, "grpc.NewServer(") {
				want = strings.TrimSpace(line)
			}
		}
	}
	if want == "" {
		t.Fatal("README.md's Server side section has no go block calling grpc.NewServer")
	}
	golden, err := os.ReadFile("testdata/golden/server_resilient.pb.go.golden")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(golden), "\n") {
		if strings.Contains(line, "grpc.NewServer(") {
			got = append(got, line)
		}
	}
	if len(got) == 0 {
		t.Fatal("the generated server policy's comment shows no grpc.NewServer call")
	}
	for _, line := range got {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//")) != want {
			t.Errorf("generated comment %q, want the README's %q", strings.TrimSpace(line), want)
		}
	}
}
