// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"
)

// FuzzAttackExports feeds FuzzPlugin's file arbitrary option blocks and
// asks for every export. The plugin must not panic; a refusal is one
// positioned line per problem and writes nothing; an accepted policy
// gives a service config that grpc-go loads and that never retries or
// hedges Put (not idempotent: its retries, if any, need its key) or Watch
// (a stream), and Envoy routes in which Put is retried only on a route
// that requires a non-empty idempotency-key.
func FuzzAttackExports(f *testing.F) {
	for _, s := range [][4]string{
		{"", "", "", ""},
		{"retry: {max_attempts: 4}", "idempotent: true", "", "idempotency_key: \"id\""},
		{"", "retry: {}", "hedging: {delay: {nanos: 1000000}} retry: {max_attempts: 1}", "generate_idempotency_key: true"},
		{"timeout: {seconds: 1} overall_timeout: {seconds: 2}", "retry_budget: {ratio: 1, min_retries: 4294967295}", "retry: {max_attempts: 1000000000}", "idempotency_key: \"n\" retry: {}"},
		{"idempotent: true retry: {}", "", "", "idempotent: false"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, file, svc, get, put string) {
		src := fmt.Sprintf(fuzzProto, file, svc, get, put)
		req, ok := compileFuzzRequest(src)
		if !ok {
			t.Skip("protocompile refuses the input")
		}
		req.Parameter = proto.String("module=" + testModule + ",service_config=true,envoy=true,docs=true")
		resp, putIdempotent := runExportsOnce(t, req)
		if resp.Error != nil {
			for _, line := range strings.Split(resp.GetError(), "\n") {
				if !positioned.MatchString(line) {
					t.Fatalf("refusal line without file:line:column: %q\nfor\n%s", line, src)
				}
			}
			if len(resp.File) != 0 {
				t.Fatalf("the plugin refused and still wrote %d files", len(resp.File))
			}
			return
		}
		files := map[string]string{}
		for _, f := range resp.File {
			files[f.GetName()] = f.GetContent()
		}
		sc, ok := files["fuzz/fuzz.service_config.json"]
		if !ok {
			t.Fatalf("no service config among %v", keys(files))
		}
		checkFuzzServiceConfig(t, sc, src, putIdempotent)
		checkFuzzEnvoy(t, files["fuzz/fuzz.envoy.yaml"], src, putIdempotent)
	})
}

// runExportsOnce runs the plugin with its exports, turning a panic into a
// test failure, and says whether Put resolved idempotent (idempotent: true
// on the file, the service or Put may make it so): then any caller may
// repeat it.
func runExportsOnce(t *testing.T, req *pluginpb.CodeGeneratorRequest) (_ *pluginpb.CodeGeneratorResponse, putIdempotent bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the plugin panicked: %v", r)
		}
	}()
	var flags flag.FlagSet
	o := newExportOptions(&flags)
	gen, err := protogen.Options{ParamFunc: paramFunc(&flags)}.New(req)
	if err != nil {
		t.Fatalf("protogen: %v", err)
	}
	if err := generateWith(gen, o); err != nil {
		gen.Error(err)
	}
	resp := gen.Response()
	if resp.Error != nil {
		return resp, false
	}
	// The resolved policy of Put, for the checks.
	for _, f := range gen.Files {
		if f.Generate && len(f.Services) > 0 {
			sp := resolveService(f.Services[0])
			putIdempotent = sp.Policy.Methods[1].Idempotent
		}
	}
	return resp, putIdempotent
}

func checkFuzzServiceConfig(t *testing.T, sc, src string, putIdempotent bool) {
	t.Helper()
	var parsed struct {
		MethodConfig []struct {
			Name          []struct{ Service, Method string }
			RetryPolicy   json.RawMessage
			HedgingPolicy json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(sc), &parsed); err != nil {
		t.Fatalf("service config is not JSON: %v\n%s", err, sc)
	}
	for _, mc := range parsed.MethodConfig {
		m := mc.Name[0].Method
		repeated := mc.RetryPolicy != nil || mc.HedgingPolicy != nil
		if (m == "Watch" || (m == "Put" && !putIdempotent)) && repeated {
			t.Fatalf("the service config repeats %s:\n%s\nfor\n%s", m, sc, src)
		}
	}
	cc, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		t.Fatalf("grpc-go refuses the exported service config: %v\n%s\nfor\n%s", err, sc, src)
	}
	cc.Close()
}

func checkFuzzEnvoy(t *testing.T, y, src string, putIdempotent bool) {
	t.Helper()
	routes := strings.Split(y, "\n    - name: ")
	for _, r := range routes[1:] {
		name := r[:strings.Index(r, "\n")]
		var values []string
		for _, line := range strings.Split(r, "\n") {
			values = append(values, strings.SplitN(line, "#", 2)[0])
		}
		v := strings.Join(values, "\n")
		retried := strings.Contains(v, "retry_policy:")
		switch {
		case strings.HasSuffix(name, "/Watch") && retried:
			t.Fatalf("Envoy retries the stream:\n%s\nfor\n%s", y, src)
		case strings.HasSuffix(name, "/Put") && retried && !putIdempotent:
			t.Fatalf("Envoy retries Put without its key:\n%s\nfor\n%s", y, src)
		case strings.HasSuffix(name, "/Put with idempotency-key") && !strings.Contains(v, `regex: ".+"`):
			t.Fatalf("Put's keyed route does not require a key with a value:\n%s", y)
		}
	}
}
