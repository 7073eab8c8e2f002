// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/go-resilient/resilient/internal/rules"
)

// attackR18Source writes a .proto with one service of a unary Get and a
// server-streaming Watch carrying the options given (each "" for none):
// the file's on line 5, the service's on line 8, Get's on line 10,
// Watch's on line 13.
func attackR18Source(file, service, get, watch string) string {
	opt := func(indent, ext, body string) string {
		if body == "" {
			return indent + "// none"
		}
		return indent + "option (resilient.v1." + ext + ") = {" + body + "};"
	}
	return strings.Join([]string{
		`syntax = "proto3";`,
		`package atk.r18;`,
		`import "resilient/v1/resilient.proto";`,
		`option go_package = "resilienttest/atk/r18;r18";`,
		opt("", "file", file),
		``,
		`service Svc {`,
		opt("  ", "service", service),
		`  rpc Get(Req) returns (Resp) {`,
		opt("    ", "method", get),
		`  }`,
		`  rpc Watch(Req) returns (stream Resp) {`,
		opt("    ", "method", watch),
		`  }`,
		`}`,
		`message Req { string request_id = 1; repeated string tags = 2; }`,
		`message Resp {}`,
	}, "\n") + "\n"
}

// TestAttackR18ChecksLintIsThePlugin: on a grid of bad single values,
// extremes and values wrong only with another level's, at each level, the
// plugin refuses exactly what the lint rules (rules.CheckFile, the buf
// check plugin's pass) find, in the same order, and reports each at the
// line of the option that set it. Lint must never pass what generation
// refuses, nor the other way round.
func TestAttackR18ChecksLintIsThePlugin(t *testing.T) {
	one := []string{
		`timeout: {seconds: 0}`, `timeout: {nanos: -5}`, `timeout: {seconds: 1, nanos: -1}`, `overall_timeout: {nanos: 1000000000}`,
		`timeout: {seconds: 315576000000}`, `retry: {max_attempts: 0}`, `retry: {max_attempts: 4294967295}`, `retry: {backoff_multiplier: nan}`,
		`retry: {backoff_multiplier: -inf}`, `retry: {initial_backoff: {seconds: 5}}`, `retry: {max_backoff: {nanos: 1}}`,
		`retry: {retryable_codes: ["OK", "BOGUS", "NOT_FOUND", "unavailable"]}`, `retry_budget: {ratio: 0}`, `retry_budget: {ratio: inf}`,
		`circuit_breaker: {failure_ratio: 1.5}`, `circuit_breaker: {window_calls: 10}`, `circuit_breaker: {window_calls: 4294967295}`,
		`circuit_breaker: {window_calls: 50, window: {seconds: 1}}`, `circuit_breaker: {slow_call_threshold: {seconds: 0}}`,
		`circuit_breaker: {failure_codes: ["OK"]}`, `circuit_breaker: {per_method: true}`, `bulkhead: {permits: 0}`, `bulkhead: {max_wait: {seconds: -1}}`,
		`bulkhead: {max_wait: {}}`, `rate_limit: {requests_per_second: nan}`, `rate_limit: {requests_per_second: 1, burst: 0}`, `rate_limit: {burst: 3}`,
		`adaptive_limit: {max_limit: 4194304}`, `adaptive_limit: {min_limit: 0}`, `adaptive_limit: {initial_limit: 500}`, `adaptive_limit: {tolerance: 0.5}`,
		`adaptive_limit: {smoothing: nan}`, `adaptive_limit: {baseline_window: {nanos: 9}}`, `client_throttle: {k: 0.5}`, `client_throttle: {max_refusal: 1}`,
		`client_throttle: {window: {nanos: 1}}`, `server: {min_deadline: {seconds: 0}}`, `server: {min_deadline: {seconds: 5}, default_timeout: {seconds: 1}}`,
		`server: {dedup: {ttl: {nanos: 1}, lease: {nanos: 1}, on_store_error: 7}}`, `shedding: {low: 0}`, `shedding: {low: 30, normal: 20, high: 40, critical: 50}`,
		`shedding: {low: 1, normal: 2, high: 3, critical: 4, code: "OK"}`, `shedding: {low: 1, normal: 2, high: 3, critical: 4, code: "bogus"}`,
		`hedging: {delay: {seconds: 0}}`, `hedging: {delay: {nanos: 1}, max_copies: 1}`, `hedging: {delay: {nanos: 1}, non_fatal_codes: ["OK"]}`,
		`cache: {fresh_ttl: {seconds: 2}, stale_ttl: {seconds: 1}, key_fields: ["request_id", "request_id"]}`, `cache: {fresh_ttl: {seconds: -1}, key_fields: ["tags"]}`,
		`priority: 9`, `idempotency_key: "request_id", generate_idempotency_key: true`, `generate_idempotency_key: true`,
	}
	type input struct{ file, service, get, watch string }
	var inputs []input
	for _, o := range one {
		base := `idempotent: true, timeout: {seconds: 1}`
		if strings.HasPrefix(o, "timeout:") {
			base = `idempotent: true`
		}
		inputs = append(inputs,
			input{o, ``, base, ``},
			input{``, o, base, ``},
			input{``, ``, base + `, ` + o, o},
			input{o, o, `idempotent: true, ` + o, ``},
		)
	}
	// Values wrong only with another level's, and right only with it.
	inputs = append(inputs,
		input{`retry: {initial_backoff: {seconds: 2}}`, ``, `idempotent: true, retry: {max_backoff: {seconds: 1}}`, ``},
		input{`retry: {max_backoff: {nanos: 10000000}}`, `retry: {initial_backoff: {nanos: 5000000}}`, `idempotent: true`, ``},
		input{`overall_timeout: {seconds: 1}`, `timeout: {seconds: 2}`, `idempotent: true`, ``},
		input{`circuit_breaker: {minimum_calls: 100}`, `circuit_breaker: {window_calls: 50}`, ``, `circuit_breaker: {per_method: true, minimum_calls: 10}`},
		input{`adaptive_limit: {max_limit: 5}`, `adaptive_limit: {min_limit: 10}, timeout: {seconds: 1}`, `adaptive_limit: {per_method: true, initial_limit: 7}`, ``},
		input{`bulkhead: {permits: 2}`, `adaptive_limit: {min_limit: 3}`, `timeout: {seconds: 1}`, ``},
		input{`shedding: {low: 10, normal: 20, high: 30, critical: 40}`, `shedding: {low: 50}`, ``, ``},
		input{`server: {min_deadline: {seconds: 2}}`, ``, `server: {default_timeout: {seconds: 1}}`, `server: {default_timeout: {seconds: 3}}`},
		input{`idempotency_key: "request_id"`, ``, `generate_idempotency_key: true`, ``},
		input{`timeout: {seconds: 1}`, `retry: {max_attempts: 3}`, `idempotent: true, hedging: {delay: {seconds: 2}}`, `hedging: {delay: {nanos: 1}}`},
	)
	lineOf := map[string]string{"(resilient.v1.file)": "5", "(resilient.v1.service)": "8"}
	dir := t.TempDir()
	refused := 0
	for i, in := range inputs {
		name := fmt.Sprintf("atk%d.proto", i)
		src := attackR18Source(in.file, in.service, in.get, in.watch)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		req := compileRequest(t, "module="+testModule, []string{dir, "../../options"}, name)
		var plugin []string
		if e := runPlugin(t, req).GetError(); e != "" {
			refused++
			for _, line := range strings.Split(e, "\n") {
				pos, rest, _ := strings.Cut(line, ": ")
				plugin = append(plugin, rest)
				// The line of the option of the level named.
				_, after, _ := strings.Cut(rest, ": ")
				level, _, _ := strings.Cut(after, ")")
				level += ")"
				want, ok := lineOf[level]
				if level == "(resilient.v1.method)" {
					want, ok = "10", true
					if strings.HasPrefix(rest, "atk.r18.Svc.Watch: ") {
						want = "13"
					}
				}
				if parts := strings.Split(pos, ":"); !ok || len(parts) != 3 || parts[1] != want {
					t.Errorf("%s: reported at %s, not on the line of its option (%s):\n%s", name, pos, want, line)
				}
			}
		}
		var lint []string
		lintFindings(t, req, func(d protoreflect.Descriptor, fi rules.Finding) {
			if fi.Rule != rules.RuleNoTimeout {
				lint = append(lint, fmt.Sprintf("%s: %s.%s: %s", d.FullName(), fi.Level.Option(), fi.Path, fi.Message))
			}
		})
		if !slices.Equal(plugin, lint) {
			t.Errorf("%s:\n%s\nthe plugin refuses:\n  %s\nlint finds:\n  %s", name, src, strings.Join(plugin, "\n  "), strings.Join(lint, "\n  "))
		}
	}
	if refused < len(inputs)/2 {
		t.Fatalf("only %d of %d inputs refused: the grid misses its values", refused, len(inputs))
	}
}
