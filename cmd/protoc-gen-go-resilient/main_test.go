// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// runMainEnv makes the test binary act as the plugin itself, so that tests
// can run main as protoc would.
const runMainEnv = "PROTOC_GEN_GO_RESILIENT_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testModule is the Go module path the test protos' go_package lives in.
const testModule = "resilienttest"

// compileRequest compiles .proto files, found under importPaths, in the
// test process and returns the request protoc would send to a plugin:
// every file with its dependencies before it, source info included.
func compileRequest(t testing.TB, param string, importPaths []string, files ...string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: importPaths}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), files...)
	if err != nil {
		t.Fatalf("compiling %v: %v", files, err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files}
	if param != "" {
		req.Parameter = proto.String(param)
	}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i, imports := 0, fd.Imports(); i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protoutil.ProtoFromFileDescriptor(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	// Through the wire and back, as protoc sends it: the options then reach
	// the plugin as typed extensions, resolved by the linked-in registry.
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out := new(pluginpb.CodeGeneratorRequest)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// testRequest compiles files under testdata, with the options contract of
// this repository.
func testRequest(t testing.TB, files ...string) *pluginpb.CodeGeneratorRequest {
	return compileRequest(t, "module="+testModule, []string{"testdata", "../../options"}, files...)
}

// runPlugin runs the generator in-process, as main does.
func runPlugin(t testing.TB, req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	var flags flag.FlagSet
	gen, err := protogen.Options{ParamFunc: flags.Set}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := generate(gen); err != nil {
		gen.Error(err)
	}
	return gen.Response()
}

// goldenInputs lists the protos under testdata/gen.
func goldenInputs(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob("testdata/gen/*.proto")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no test protos: %v", err)
	}
	var files []string
	for _, p := range paths {
		files = append(files, "gen/"+filepath.Base(p))
	}
	return files
}

func TestGolden(t *testing.T) {
	for _, file := range goldenInputs(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".proto")
		t.Run(name, func(t *testing.T) {
			resp := runPlugin(t, testRequest(t, file))
			if resp.Error != nil {
				t.Fatalf("plugin error:\n%s", resp.GetError())
			}
			if name == "messages_only" {
				if len(resp.File) != 0 {
					t.Fatalf("a file without services gave %d files, want none", len(resp.File))
				}
				return
			}
			wantName := name + "/" + name + "_resilient.pb.go"
			if len(resp.File) != 1 || resp.File[0].GetName() != wantName {
				var names []string
				for _, f := range resp.File {
					names = append(names, f.GetName())
				}
				t.Fatalf("generated %v, want [%s]", names, wantName)
			}
			got := resp.File[0].GetContent()
			golden := filepath.Join("testdata", "golden", name+"_resilient.pb.go.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from %s (run go test -update to rewrite it); got:\n%s", wantName, golden, got)
			}
		})
	}
}

// TestExampleInSync checks that the checked-in example/gen/*_resilient.pb.go
// files are what the plugin generates from example/proto.
func TestExampleInSync(t *testing.T) {
	for _, name := range []string{"inventory", "payments"} {
		file := "example/" + name + "/v1/" + name + ".proto"
		req := compileRequest(t, "module=github.com/go-resilient/resilient", []string{"../../example/proto", "../../options"}, file)
		resp := runPlugin(t, req)
		if resp.Error != nil {
			t.Fatalf("plugin error:\n%s", resp.GetError())
		}
		if len(resp.File) != 1 {
			t.Fatalf("%s: generated %d files, want 1", file, len(resp.File))
		}
		path := filepath.Join("..", "..", filepath.FromSlash(resp.File[0].GetName()))
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if resp.File[0].GetContent() != string(want) {
			t.Errorf("%s is out of date: run go tool -modfile=tools/go.mod buf generate", path)
		}
	}
}

func TestVersion(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "protoc-gen-go-resilient v"+version+"\n"; got != want {
		t.Errorf("--version printed %q, want %q", got, want)
	}
}

// runMain runs the plugin binary (this test binary acting as main) on a
// request, as protoc does: the request on stdin, the response on stdout.
func runMain(t *testing.T, req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return runMainBytes(t, in)
}

// runMainBytes runs the plugin binary on the bytes of a request, which
// may be one this plugin's options cannot read; the plugin must answer
// (a refusal in the response, not a failure of the process).
func runMainBytes(t *testing.T, in []byte) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the plugin failed (%v) instead of answering; stderr: %s", err, stderr.String())
	}
	resp := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(out, resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestMainProtocol(t *testing.T) {
	req := testRequest(t, "gen/rpc_kinds.proto")
	got, want := runMain(t, req), runPlugin(t, req)
	if !proto.Equal(got, want) {
		t.Errorf("main answered\n%v\nthe generator answers\n%v", got, want)
	}
	if got.GetSupportedFeatures()&uint64(pluginpb.CodeGeneratorResponse_FEATURE_SUPPORTS_EDITIONS) == 0 {
		t.Errorf("editions are not declared as supported: %v", got)
	}

	// protogen refuses an unknown parameter before the generator runs: the
	// plugin fails, saying which.
	req.Parameter = proto.String("module=" + testModule + ",bogus=1")
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// protogen names the plugin (here the test binary) before the message;
	// the message does not name it again.
	wantErr := filepath.Base(os.Args[0]) + `: unknown parameter "bogus": the plugin takes docs=…, envoy=…, envoy_retries=…, service_config=…, besides protogen's paths=, module=, annotate_code and M…` + "\n"
	if err := cmd.Run(); err == nil || stderr.String() != wantErr {
		t.Errorf("an unknown parameter gave %v,\n%q\nwant a failure saying\n%q", err, stderr.String(), wantErr)
	}
}

// TestOptionsProtoFlag checks that -options-proto writes the options
// contract of this version, a header and the source byte for byte, at its
// import path, replacing an older copy, and that a file importing the
// copy generates the same client as with this repository's.
func TestOptionsProtoFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "third_party")
	dst := filepath.Join(dir, "resilient", "v1", "resilient.proto")
	writeFile(t, dst, []byte("an older copy"))
	cmd := exec.Command(os.Args[0], "-options-proto="+dir)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := string(out), "wrote "+dst+"\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../options/resilient/v1/resilient.proto")
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := bytes.Cut(got, []byte("\n\n"))
	if !ok || !bytes.Equal(body, src) || !bytes.Contains(header, []byte("protoc-gen-go-resilient v"+version+" -options-proto")) {
		t.Errorf("wrote\n%s\nwant a header naming v%s, then the source", got, version)
	}
	req := compileRequest(t, "module="+testModule, []string{"testdata", dir}, "gen/retry_explicit.proto")
	if a, b := runPlugin(t, req), runPlugin(t, testRequest(t, "gen/retry_explicit.proto")); !proto.Equal(a, b) {
		t.Errorf("the written copy gives\n%v\nthis repository's\n%v", a, b)
	}

}
