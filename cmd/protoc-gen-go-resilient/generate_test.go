// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The client part of every generated file (the options, the client type,
// its constructor and methods) reads like code a person wrote: no line
// longer than 100 columns, a tab counting 8, and each method bound by
// protoc-gen-go-grpc's _FullMethodName constant, never by position.
func TestGeneratedClientReads(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*_resilient.pb.go.golden"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Glob(filepath.Join("..", "..", "example", "gen", "example", "*", "v1", "*_resilient.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, example...)
	if len(files) < 10 {
		t.Fatalf("found only %d generated files: %q", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		client := false
		for i, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.Contains(line, "ResilientOptions configures"):
				client = true
			case strings.Contains(line, "ResilientPolicy is the policy annotated"),
				strings.Contains(line, "ServerPolicy is the server-side policy"):
				client = false
			}
			if !client {
				continue
			}
			if n := len(strings.ReplaceAll(line, "\t", "        ")); n > 100 {
				t.Errorf("%s:%d: %d columns: %s", f, i+1, n, line)
			}
			for _, positional := range []string{".Method(", `, "",`} {
				if strings.Contains(line, positional) {
					t.Errorf("%s:%d: binds by position (%s): %s", f, i+1, positional, line)
				}
			}
			if strings.Contains(line, "runtime.New") && strings.Contains(line, "(rt, ") &&
				!strings.HasSuffix(line, "_FullMethodName,") {
				t.Errorf("%s:%d: a handle not bound by its _FullMethodName constant: %s", f, i+1, line)
			}
		}
	}
}
