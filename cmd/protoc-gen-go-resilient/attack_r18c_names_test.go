// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/types/pluginpb"
)

// r18cRequest compiles files under testdata/attack_r18c with the
// repository's options contract.
func r18cRequest(t *testing.T, files ...string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	return compileRequest(t, "module="+testModule, []string{"testdata/attack_r18c", "../../options"}, files...)
}

// r18cCompile generates Go for files (protoc-gen-go, -go-grpc and this
// plugin) and builds and vets it with the repository's runtime.
func r18cCompile(t *testing.T, files ...string) {
	t.Helper()
	goBin, repo := goAndRepo(t, "compiling generated code")
	dir := t.TempDir()
	req := r18cRequest(t, files...)
	writeGoAndGRPC(t, goBin, repo, dir, req)
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	if len(resp.File) == 0 {
		t.Fatal("the plugin wrote nothing")
	}
	for _, f := range resp.File {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
	}
	buildAndVet(t, goBin, dir, repo, testModule, " (generated for "+filepath.Join(files...)+")")
}

// TestAttackR18cMemberNames: methods named like the client's members
// (Runtime, ResilientRuntime, Policy, Conn, Close, …) and like the
// generated code's locals, services named Conn, Policy and Runtime, a
// method without options in a service with them, each kind of stream,
// and a cached method whose request is a message of another package: the
// README promises the output compiles beside protoc-gen-go-grpc's.
func TestAttackR18cMemberNames(t *testing.T) {
	r18cCompile(t, "collide/members.proto", "other/other.proto")
}

// TestAttackR18cServicePair: a service X beside a service XResilient.
// protoc-gen-go-grpc declares XResilientClient and NewXResilientClient
// (the client of service XResilient), which are also the names of this
// plugin's client of X; and a message YResilientPolicy beside a service Y
// takes the name of Y's policy literal. The Go could not compile: the
// plugin refuses, at each service, naming the generated name and who else
// declares it, and writes nothing (it wrote code that failed to build).
func TestAttackR18cServicePair(t *testing.T) {
	resp := runPlugin(t, r18cRequest(t, "collide/pair.proto"))
	if len(resp.File) != 0 {
		t.Errorf("wrote %d files for names that collide", len(resp.File))
	}
	want := "collide/pair.proto:10:1: resilienttest.r18c.pair.X: its resilient client declares XResilientClient, which protoc-gen-go-grpc for service resilienttest.r18c.pair.XResilient (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto\n" +
		"collide/pair.proto:10:1: resilienttest.r18c.pair.X: its resilient client declares NewXResilientClient, which protoc-gen-go-grpc for service resilienttest.r18c.pair.XResilient (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto\n" +
		"collide/pair.proto:25:1: resilienttest.r18c.pair.Y: its resilient client declares YResilientPolicy, which protoc-gen-go for message resilienttest.r18c.pair.YResilientPolicy (collide/pair.proto) declares too, in Go package \"resilienttest/r18c/pair\": the Go would not compile; rename one of the two in the .proto"
	if got := resp.GetError(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
