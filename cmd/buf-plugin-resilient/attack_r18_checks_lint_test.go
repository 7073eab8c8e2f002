// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"buf.build/go/bufplugin/check"
	"buf.build/go/bufplugin/check/checktest"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// TestAttackR18ChecksLintDropsNothing: the rebuilt checks report every
// value problem as RESILIENT_INVALID_VALUE and the merged-level ones under
// their own rules. Run as buf runs it, with the rules on by default, the
// lint plugin must annotate every finding of the pass the code generator
// makes (rules.CheckFile) but the lint-only RESILIENT_NO_TIMEOUT, once
// each: a finding under a rule the spec lacks, or one off by default,
// would pass lint and fail generation. Inputs: bad single values and
// extremes at each level, and values wrong only with another level's.
func TestAttackR18ChecksLintDropsNothing(t *testing.T) {
	src := func(file, service, get, watch string) string {
		opt := func(indent, ext, body string) string {
			if body == "" {
				return ""
			}
			return indent + "option (resilient.v1." + ext + ") = {" + body + "};\n"
		}
		return `syntax = "proto3";
package atk.r18;
import "resilient/v1/resilient.proto";
` + opt("", "file", file) + `service Svc {
` + opt("  ", "service", service) + `  rpc Get(Req) returns (Resp) {
` + opt("    ", "method", get) + `  }
  rpc Watch(Req) returns (stream Resp) {
` + opt("    ", "method", watch) + `  }
}
message Req { string request_id = 1; repeated string tags = 2; }
message Resp {}
`
	}
	inputs := [][4]string{
		{`timeout: {seconds: 0}, retry: {max_attempts: 0, backoff_multiplier: nan}`, `circuit_breaker: {failure_ratio: inf, window_calls: 4294967295}`, `idempotent: true, retry: {retryable_codes: ["OK", "BOGUS"]}`, ``},
		{`shedding: {low: 0, code: "bogus"}`, `adaptive_limit: {max_limit: 4194304, tolerance: 0.5}`, `hedging: {delay: {seconds: 0}}`, `hedging: {delay: {nanos: 1}}`},
		{`hedging: {delay: {nanos: 1}}`, `cache: {fresh_ttl: {seconds: 1}}`, `retry_budget: {ratio: 0}, shedding: {low: 1}, client_throttle: {k: 2}`, `rate_limit: {requests_per_second: 1}`},
		{`server: {dedup: {ttl: {nanos: 1}, lease: {seconds: 1, nanos: -1}, on_store_error: 7}}`, `priority: 9`, `idempotency_key: "tags", generate_idempotency_key: true`, `idempotency_key: "request_id"`},
		{`retry: {initial_backoff: {seconds: 2}}`, ``, `idempotent: true, retry: {max_backoff: {seconds: 1}}`, ``},
		{`overall_timeout: {seconds: 1}`, `timeout: {seconds: 2}`, `idempotent: true, retry: {max_attempts: 3}`, `retry: {max_attempts: 3}`},
		{`circuit_breaker: {minimum_calls: 100}`, `circuit_breaker: {window_calls: 50}`, `circuit_breaker: {per_method: true, minimum_calls: 10}`, `circuit_breaker: {window_calls: 5}`},
		{`adaptive_limit: {max_limit: 5}, bulkhead: {permits: 2}`, `adaptive_limit: {min_limit: 10}`, `adaptive_limit: {per_method: true}`, `adaptive_limit: {per_method: true}`},
		{`shedding: {low: 10, normal: 20, high: 30, critical: 40}`, `shedding: {low: 50}`, ``, ``},
		{`server: {min_deadline: {seconds: 2}}`, ``, `server: {default_timeout: {seconds: 1}, dedup: {ttl: {seconds: 60}}}`, `server: {dedup: {ttl: {seconds: 60}}}`},
		{`timeout: {seconds: 1}`, `retry: {max_attempts: 3}`, `idempotent: false, hedging: {delay: {seconds: 2}}, cache: {fresh_ttl: {seconds: 1}, key_fields: ["tags"]}`, `rate_limit: {per_method: true, requests_per_second: 1}`},
		{`bulkhead: {permits: 0, per_method: true}, rate_limit: {burst: 0}`, `bulkhead: {}`, `bulkhead: {permits: 3}`, `circuit_breaker: {failure_ratio: 0.5}`},
	}
	ctx := context.Background()
	client, err := check.NewClientForSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	total := 0
	for i, in := range inputs {
		name := fmt.Sprintf("atk/atk%d.proto", i)
		if err := os.MkdirAll(filepath.Join(dir, "atk"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src(in[0], in[1], in[2], in[3])), 0o644); err != nil {
			t.Fatal(err)
		}
		req, err := (&checktest.RequestSpec{Files: &checktest.ProtoFileSpec{DirPaths: []string{dir, "../../options"}, FilePaths: []string{name}}}).ToRequest(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp, err := client.Check(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, a := range resp.Annotations() {
			got = append(got, a.RuleID()+" "+a.Message())
		}
		var want []string
		for _, f := range req.FileDescriptors() {
			if f.IsImport() {
				continue
			}
			rules.CheckFile(f.ProtoreflectFileDescriptor(), func(d protoreflect.Descriptor, fi rules.Finding) {
				if fi.Rule != rules.RuleNoTimeout {
					want = append(want, fmt.Sprintf("%s %s: %s.%s: %s", fi.Rule, d.FullName(), fi.Level.Option(), fi.Path, fi.Message))
				}
			})
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: lint annotates\n  %s\nthe generator's pass finds\n  %s", name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		total += len(want)
	}
	if total < 3*len(inputs) {
		t.Fatalf("only %d findings in %d inputs: the inputs miss their values", total, len(inputs))
	}
}
