// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/go-resilient/resilient/runtime"
	"github.com/go-resilient/resilient/runtime/policy"
	"github.com/go-resilient/resilient/runtime/server"
)

const todayExtremeProto = `syntax = "proto3";
package attack.extreme;
import "resilient/v1/resilient.proto";
option go_package = "resilienttest/attack/extreme";
message Req { string order_id = 1; }
message Resp {}
service S {
  option (resilient.v1.service) = {timeout: {nanos: 300000000} %s};
  rpc Get(Req) returns (Resp) {
    option idempotency_level = NO_SIDE_EFFECTS;
    option (resilient.v1.method) = {%s};
  }
  rpc Put(Req) returns (Resp) {
    option (resilient.v1.method) = {idempotency_key: "order_id" server: {dedup: {%s}}};
  }
}
`

const todayTTL = "ttl: {seconds: 86400}"

// A value the plugin accepts is one every other boundary accepts, printed
// as Go that compiles: for extreme numbers of every kind of option (NaN,
// ±Inf, the largest and smallest doubles, the largest uint32, the longest
// Duration), the plugin either refuses (writing nothing) or writes a
// literal that parses as Go with no NaN or Inf in it, of a resolution
// that policy.Service.Validate, runtime.NewClient, policy.Server.Validate
// and server.NewGuard accept. Nothing panics.
func TestAttackTodayPluginExtremesAgreeWithGo(t *testing.T) {
	svc, meth, dedups := todayExtremes()
	if _, perr := attackProto(t, "extreme.proto", fmt.Sprintf(todayExtremeProto, "", "", todayTTL), ""); perr != "" {
		t.Fatalf("the base proto is refused: %s", perr)
	}
	accepted, refused := 0, 0
	check := func(s, m, dedup string) {
		t.Helper()
		src := fmt.Sprintf(todayExtremeProto, s, m, dedup)
		name := fmt.Sprintf("service {%s} method {%s} dedup {%s}", s, m, dedup)
		var files map[string]string
		var perr string
		func() {
			defer func() {
				if r := recover(); r != nil {
					perr = fmt.Sprintf("panicked: %v", r)
					t.Errorf("%s: the plugin panicked: %v", name, r)
				}
			}()
			files, perr = attackProto(t, "extreme.proto", src, "service_config=true,envoy=true,docs=true")
		}()
		if perr != "" {
			refused++
			if len(files) != 0 {
				t.Errorf("%s: refused, yet %d files written", name, len(files))
			}
			return
		}
		accepted++
		goFile := files["attack/extreme/extreme_resilient.pb.go"]
		if _, err := parser.ParseFile(token.NewFileSet(), "x.go", goFile, 0); err != nil {
			t.Errorf("%s: the generated Go does not parse: %v", name, err)
		}
		for _, bad := range []string{"NaN", "Inf"} {
			if strings.Contains(goFile, ": "+bad) || strings.Contains(goFile, ": +"+bad) || strings.Contains(goFile, ": -"+bad) {
				t.Errorf("%s: the literal holds %s", name, bad)
			}
		}
		checkInForce(t, name, "Validate refuses", todayResolve(t, src))
	}
	for _, s := range svc {
		check(s, "", todayTTL)
	}
	for _, m := range meth {
		check("", m, todayTTL)
	}
	for _, d := range dedups {
		check("", "", d)
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatal("the grid tries nothing on one side")
	}
}

// todayExtremes lists option snippets with extreme numbers: of the
// service's option, of Get's, and of Put's dedup.
func todayExtremes() (svc, meth, dedups []string) {
	floats := []string{"nan", "inf", "-inf", "1e308", "1e-308", "4.9e-324", "0", "-0.0", "0.999999999999", "1.0000000001", "1"}
	u32 := []string{"0", "1", "2", "4294967295"}
	durs := []string{"{nanos: 1}", "{nanos: 10}", "{seconds: 9223372036}", "{seconds: 9223372036, nanos: 854775807}", "{seconds: 315576000000}"}
	for _, f := range floats {
		svc = append(svc,
			"retry_budget: {ratio: "+f+"}", "circuit_breaker: {failure_ratio: "+f+"}", "rate_limit: {requests_per_second: "+f+"}",
			"adaptive_limit: {tolerance: "+f+"}", "adaptive_limit: {smoothing: "+f+"}",
			"client_throttle: {k: "+f+"}", "client_throttle: {max_refusal: "+f+"}")
		meth = append(meth, "retry: {max_attempts: 3, backoff_multiplier: "+f+"}")
	}
	for _, n := range u32 {
		svc = append(svc,
			"adaptive_limit: {min_limit: "+n+"}", "adaptive_limit: {max_limit: "+n+"}", "adaptive_limit: {initial_limit: "+n+"}",
			"bulkhead: {permits: "+n+"} adaptive_limit: {}", "bulkhead: {permits: "+n+"}",
			"rate_limit: {burst: "+n+"}", "circuit_breaker: {minimum_calls: "+n+"}", "circuit_breaker: {half_open_probes: "+n+"}",
			"circuit_breaker: {window_calls: "+n+"}", "retry_budget: {min_retries: "+n+"}",
			"shedding: {low: "+n+" normal: "+n+" high: "+n+" critical: "+n+"}")
		meth = append(meth, "retry: {max_attempts: "+n+"}", "hedging: {max_copies: "+n+", delay: {nanos: 1000000}}",
			"cache: {max_entries: "+n+"}", "adaptive_limit: {per_method: true, max_limit: "+n+"}")
	}
	for _, d := range durs {
		svc = append(svc,
			"circuit_breaker: {cool_down: "+d+"}", "circuit_breaker: {window: "+d+"}", "circuit_breaker: {slow_call_threshold: "+d+"}",
			"retry_budget: {window: "+d+"}", "adaptive_limit: {baseline_window: "+d+"}", "client_throttle: {window: "+d+"}",
			"bulkhead: {max_wait: "+d+"}", "rate_limit: {max_wait: "+d+"}",
			"shedding: {low: 1 normal: 1 high: 1 critical: 1 pushback: "+d+"}", "server: {min_deadline: "+d+"}")
		meth = append(meth, "overall_timeout: "+d, "retry: {initial_backoff: "+d+"}", "retry: {max_backoff: "+d+"}",
			"cache: {fresh_ttl: "+d+"}", "cache: {stale_ttl: "+d+"}", "hedging: {delay: "+d+"}",
			"server: {default_timeout: "+d+"}")
	}
	for _, d := range durs {
		dedups = append(dedups, "ttl: "+d, todayTTL+" lease: "+d)
	}
	return svc, meth, dedups
}

// todayResolve compiles src as extreme.proto and returns the plugin's
// resolution of its one service.
func todayResolve(t *testing.T, src string) *service {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "extreme.proto"), []byte(src))
	return resolveOne(t, compileRequest(t, "module="+testModule, []string{dir, "../../options"}, "extreme.proto"))
}

// resolveOne returns the plugin's resolution of the first service of the
// file req asks to generate.
func resolveOne(t *testing.T, req *pluginpb.CodeGeneratorRequest) *service {
	t.Helper()
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			return resolveFile(f, &problems{})[0]
		}
	}
	t.Fatal("no file to generate")
	return nil
}

func todayNewResponse() proto.Message { return new(emptypb.Empty) }

// checkInForce reports, for the input named at, a resolution sp the plugin
// accepted that policy.Service.Validate, runtime.NewClient,
// policy.Server.Validate or server.NewGuard refuses. refused words the
// failure of Validate.
func checkInForce(t *testing.T, at, refused string, sp *service) {
	t.Helper()
	if err := sp.Policy.Validate(); err != nil {
		t.Errorf("%s: the plugin accepts, %s: %v", at, refused, err)
	} else if _, err := runtime.NewClient(&sp.Policy); err != nil {
		t.Errorf("%s: the plugin accepts, NewClient refuses: %v", at, err)
	}
	if sp.Server != nil {
		sv := sp.Server.Clone()
		for i := range sv.Methods {
			if sv.Methods[i].Dedup != nil {
				sv.Methods[i].NewResponse = todayNewResponse
			}
		}
		if err := sv.Validate(); err != nil {
			t.Errorf("%s: the plugin accepts, Server.Validate refuses: %v", at, err)
		} else if _, err := server.NewGuard([]*policy.Server{&sv}, server.WithStore(server.NewMemoryStore(8))); err != nil {
			t.Errorf("%s: the plugin accepts, NewGuard refuses: %v", at, err)
		}
	}
}
