// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/types/pluginpb"
)

// a22cRequest compiles files under testdata/attack22c with the
// repository's options contract.
func a22cRequest(t *testing.T, files ...string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	return compileRequest(t, "module="+testModule, []string{"testdata/attack22c", "../../options"}, files...)
}

// a22cCompile generates Go for files (protoc-gen-go, -go-grpc and this
// plugin) and builds and vets it with the repository's runtime.
func a22cCompile(t *testing.T, files ...string) {
	t.Helper()
	goBin, repo := goAndRepo(t, "compiling generated code")
	dir := t.TempDir()
	req := a22cRequest(t, files...)
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

// TestAttack22cImportNamedLikeALocal: a method's request and response are
// messages of a Go package whose import path ends in rt, err, cc or inner.
// protogen imports such a package under that name, and protoc-gen-go-grpc's
// client compiles with it; the README promises the resilient client
// compiles beside it.
func TestAttack22cImportNamedLikeALocal(t *testing.T) {
	a22cCompile(t, "alias/svc.proto", "alias/rt.proto", "alias/err.proto", "alias/cc.proto", "alias/inner.proto")
}
