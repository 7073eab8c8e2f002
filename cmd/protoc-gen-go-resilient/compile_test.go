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

	"google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"
)

// TestGoldenCompiles builds and vets the golden files together with the
// protoc-gen-go and protoc-gen-go-grpc output for the same protos, in a
// module that uses this repository's runtime.
func TestGoldenCompiles(t *testing.T) {
	goBin, repo := goAndRepo(t, "compiling the golden files")
	dir := t.TempDir()
	req := testRequest(t, goldenInputs(t)...)

	writeGoAndGRPC(t, goBin, repo, dir, req)

	// The golden files, where the plugin writes them.
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	for _, f := range resp.File {
		golden := filepath.Join("testdata", "golden", filepath.Base(f.GetName())+".golden")
		content, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, filepath.FromSlash(f.GetName())), content)
	}

	buildAndVet(t, goBin, dir, repo, testModule, "")
}

// goAndRepo skips the test under -short (what says what is slow) or when
// go is not on PATH, and returns the go binary and this repository's root.
func goAndRepo(t *testing.T, what string) (goBin, repo string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + " is slow; skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	repo, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return goBin, repo
}

// buildAndVet makes dir a module that uses this repository (through a
// replace, offline) and runs go build and go vet in it; what, when not
// empty, says in a failure what the files are.
func buildAndVet(t *testing.T, goBin, dir, repo, module, what string) {
	t.Helper()
	goMod := "module " + module + "\n\ngo 1.26.0\n\n" +
		"require github.com/go-resilient/resilient v0.0.0\n\n" +
		"replace github.com/go-resilient/resilient => " + repo + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), []byte(goMod))
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), sum)
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s%s: %v\n%s", strings.Join(args, " "), what, err, out)
		}
	}
}

func writeResponse(t *testing.T, dir, plugin string, resp *pluginpb.CodeGeneratorResponse) {
	t.Helper()
	if resp.Error != nil {
		t.Fatalf("%s: %s", plugin, resp.GetError())
	}
	for _, f := range resp.File {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
	}
}

func writeFile(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeGoAndGRPC writes into dir what protoc-gen-go (in-process) and
// protoc-gen-go-grpc (the version pinned in tools/go.mod) generate for req.
func writeGoAndGRPC(t *testing.T, goBin, repo, dir string, req *pluginpb.CodeGeneratorRequest) {
	t.Helper()
	// protoc-gen-go, in-process.
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	gen.SupportedFeatures = internal_gengo.SupportedFeatures
	for _, f := range gen.Files {
		if f.Generate {
			internal_gengo.GenerateFile(gen, f)
		}
	}
	writeResponse(t, dir, "protoc-gen-go", gen.Response())

	// protoc-gen-go-grpc, the version pinned in tools/go.mod.
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "tool", "-modfile="+filepath.Join(repo, "tools", "go.mod"), "protoc-gen-go-grpc")
	cmd.Dir = repo
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("protoc-gen-go-grpc: %v\n%s", err, stderr.String())
	}
	grpcResp := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(out, grpcResp); err != nil {
		t.Fatal(err)
	}
	writeResponse(t, dir, "protoc-gen-go-grpc", grpcResp)
}

// testdataRequest compiles files under testdata/dir, with the options
// contract of this repository.
func testdataRequest(t testing.TB, dir string, files ...string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	return compileRequest(t, "module="+testModule, []string{filepath.Join("testdata", dir), "../../options"}, files...)
}

// compileTestdata generates Go for files under testdata/dir (protoc-gen-go,
// -go-grpc and this plugin) and builds and vets it with the repository's
// runtime.
func compileTestdata(t *testing.T, dir string, files ...string) {
	t.Helper()
	goBin, repo := goAndRepo(t, "compiling generated code")
	out := t.TempDir()
	req := testdataRequest(t, dir, files...)
	writeGoAndGRPC(t, goBin, repo, out, req)
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	if len(resp.File) == 0 {
		t.Fatal("the plugin wrote nothing")
	}
	for _, f := range resp.File {
		writeFile(t, filepath.Join(out, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
	}
	buildAndVet(t, goBin, out, repo, testModule, " (generated for "+filepath.Join(files...)+")")
}
