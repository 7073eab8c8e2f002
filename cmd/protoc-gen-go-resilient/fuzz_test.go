// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/runtime/policy"
)

// fuzzProto is the file FuzzPlugin fills with fuzzed option blocks: the
// file's, the service's and two methods' (one idempotent, one keyed), and a
// stream that inherits the service's.
const fuzzProto = `syntax = "proto3";

package fuzz.v1;

import "resilient/v1/resilient.proto";

option go_package = "resilienttest/fuzz;fuzzv1";
option (resilient.v1.file) = {%s};

message Req {
  string id = 1;
  int64 n = 2;
}

message Resp {}

service Svc {
  option (resilient.v1.service) = {%s};

  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {%s};
  }

  rpc Put(Req) returns (Resp) {
    option (resilient.v1.method) = {%s};
  }

  rpc Watch(Req) returns (stream Resp);
}
`

// positioned is how every line of a refusal starts: file:line:column.
var positioned = regexp.MustCompile(`^[^:]+:\d+:\d+: `)

// FuzzPlugin feeds the plugin arbitrary option values, written as the text
// of the option blocks of a .proto file. Inputs that protocompile refuses
// are not the plugin's business and are skipped. For the rest the plugin
// must not panic, and must either refuse with one positioned error per line
// (file:line:column: …) or generate Go that parses and whose policy the
// runtime accepts (the generated constructor calls runtime.NewClient, which
// validates it again).
func FuzzPlugin(f *testing.F) {
	seeds := [][4]string{
		{"", "", "", ""},
		{"timeout: {seconds: 1}", "circuit_breaker: {}", "retry: {max_attempts: 3}", "idempotency_key: \"id\" retry: {}"},
		{"", "bulkhead: {permits: 8, max_wait: {nanos: 20000000}} retry_budget: {ratio: 0.1}",
			"timeout: {nanos: 300000000} overall_timeout: {seconds: 1} retry: {max_attempts: 3, initial_backoff: {nanos: 50000000}, max_backoff: {nanos: 200000000}, backoff_multiplier: 2, retryable_codes: [\"UNAVAILABLE\", \"RESOURCE_EXHAUSTED\"]}",
			"idempotency_key: \"n\" retry: {max_attempts: 2}"},
		{"", "circuit_breaker: {failure_ratio: 2}", "retry: {max_attempts: 0}", "retry: {}"},
		{"retry_budget: {ratio: 0}", "", "timeout: {seconds: -1}", "idempotency_key: \"missing\""},
		{"", "circuit_breaker: {failure_ratio: 0.5, minimum_calls: 20, window: {seconds: 2}, cool_down: {seconds: 2}, half_open_probes: 3, slow_call_threshold: {nanos: 1}, failure_codes: [\"INTERNAL\"]}",
			"circuit_breaker: {per_method: true, failure_ratio: 1} bulkhead: {per_method: true, permits: 1}", "idempotent: true"},
		{"", "", "retry: {backoff_multiplier: nan}", "retry: {retryable_codes: [\"OK\"]}"},
		{"", "", "retry: {backoff_multiplier: inf, initial_backoff: {seconds: 315576000000}}", "timeout: {seconds: 315576000000, nanos: 999999999}"},
		{"", "bulkhead: {permits: 4294967295}", "retry: {max_attempts: 4294967295}", "circuit_breaker: {per_method: true, half_open_probes: 4294967295, minimum_calls: 4294967295}"},
		{"server: {min_deadline: {nanos: 10000000}}", "shedding: {low: 1, normal: 2, high: 3, critical: 4, code: \"RESOURCE_EXHAUSTED\"}",
			"priority: PRIORITY_HIGH server: {default_timeout: {seconds: 1}}",
			"idempotency_key: \"n\" server: {dedup: {ttl: {seconds: 2}, lease: {seconds: 1}, on_store_error: ON_STORE_ERROR_RUN_WITHOUT_DEDUP}}"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, file, svc, get, put string) {
		src := fmt.Sprintf(fuzzProto, file, svc, get, put)
		req, ok := compileFuzzRequest(src)
		if !ok {
			t.Skip("protocompile refuses the input")
		}
		resp := runPluginOnce(t, req)
		if resp.Error != nil {
			for _, line := range strings.Split(resp.GetError(), "\n") {
				if !positioned.MatchString(line) {
					t.Fatalf("refusal line without file:line:column:\n%q\nin\n%s\nfor\n%s", line, resp.GetError(), src)
				}
			}
			if len(resp.File) != 0 {
				t.Fatalf("the plugin refused and still wrote %d files", len(resp.File))
			}
			return
		}
		if len(resp.File) != 1 {
			t.Fatalf("generated %d files, want 1", len(resp.File))
		}
		content := resp.File[0].GetContent()
		if _, err := parser.ParseFile(token.NewFileSet(), resp.File[0].GetName(), content, parser.AllErrors); err != nil {
			t.Fatalf("generated Go does not parse: %v\n%s\nfor\n%s", err, content, src)
		}
		clients, servers := acceptedPolicies(t, req)
		for _, p := range clients {
			if err := p.Validate(); err != nil {
				t.Fatalf("the plugin accepted a policy the runtime refuses: %v\nfor\n%s", err, src)
			}
		}
		for _, p := range servers {
			if err := p.Validate(); err != nil {
				t.Fatalf("the plugin accepted a server policy NewGuard refuses: %v\nfor\n%s", err, src)
			}
		}
	})
}

// compileFuzzRequest compiles src as fuzz/fuzz.proto, with the options
// contract of this repository, into the request protoc would send. It
// reports false when protocompile refuses the file (or panics on it).
func compileFuzzRequest(src string) (req *pluginpb.CodeGeneratorRequest, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // protocompile's problem, not the plugin's
		}
	}()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
			&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{"fuzz/fuzz.proto": src})},
			&protocompile.SourceResolver{ImportPaths: []string{"../../options"}},
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(context.Background(), "fuzz/fuzz.proto")
	if err != nil {
		return nil, false
	}
	req = &pluginpb.CodeGeneratorRequest{FileToGenerate: []string{"fuzz/fuzz.proto"}, Parameter: proto.String("module=" + testModule)}
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
	for _, fd := range compiled {
		add(fd)
	}
	// Through the wire and back, as protoc sends it.
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, false
	}
	out := new(pluginpb.CodeGeneratorRequest)
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, false
	}
	return out, true
}

// runPluginOnce runs the generator as runPlugin does, turning a panic into
// a test failure that shows the input.
func runPluginOnce(t *testing.T, req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the plugin panicked: %v", r)
		}
	}()
	var flags flag.FlagSet
	gen, err := protogen.Options{ParamFunc: flags.Set}.New(req)
	if err != nil {
		t.Fatalf("protogen: %v", err)
	}
	if err := generate(gen); err != nil {
		gen.Error(err)
	}
	return gen.Response()
}

// acceptedPolicies resolves the policies of req's files as the plugin does
// and returns what the generated literals hold: the client policy of each
// service and the server policy of those that have one. A deduplicated
// method's NewResponse, which generated code writes as a function of the
// response type, is set here to one of an empty message.
func acceptedPolicies(t *testing.T, req *pluginpb.CodeGeneratorRequest) (clients []*policy.Service, servers []*policy.Server) {
	t.Helper()
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		var ps problems
		for _, sp := range resolveFile(f, &ps) {
			p := sp.Policy.Clone()
			clients = append(clients, &p)
			if sp.Server == nil {
				continue
			}
			s := sp.Server.Clone()
			for i := range s.Methods {
				if s.Methods[i].Dedup != nil {
					s.Methods[i].NewResponse = func() proto.Message { return new(emptypb.Empty) }
				}
			}
			servers = append(servers, &s)
		}
		if len(ps) != 0 {
			t.Fatalf("the plugin generated code, but resolving again finds problems: %v", ps.err())
		}
	}
	return clients, servers
}
